//! Nothing: this package holds test harnesses (`unit/`, `engine/`, `no_alloc/`).
