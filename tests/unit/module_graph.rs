//! The library's module graph (no import circles, layering).
