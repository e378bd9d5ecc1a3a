//! The process heap on transparent huge pages, where the system serves them on request.
//!
//! At 256 instances an engine's state is spread over tens of megabytes of small allocations
//! (each instance's scheduler, block lists, request slots, step times), and a step touches a
//! few pages of each: more pages than the processor's translation cache holds, so many loads
//! wait for a page walk. On 2 MiB pages the same state takes a few dozen entries. In Linux's
//! `madvise` mode (a common default) huge pages are served only to ranges marked
//! `MADV_HUGEPAGE`; glibc marks its heap only when the process starts with
//! `GLIBC_TUNABLES=glibc.malloc.hugetlb=1`, which a running process cannot set for itself. So
//! the main thread's heap is grown once by a reserve that the allocator keeps rather than
//! trims (`M_TOP_PAD`), and the reserve is marked. Pages are still faulted in only when touched
//! (the reserve is address space until then); what changes is their size. Nothing a run
//! computes depends on it.

/// How far the heap is grown ahead and kept: address space only until touched.
pub const RESERVE_BYTES: usize = 256 << 20;

/// The size of a transparent huge page on x86-64 (and aarch64 with 4 KiB base pages).
pub const HUGE_PAGE_BYTES: usize = 2 << 20;

/// Allocations up to this size come from the (marked) heap rather than a mapping of their own:
/// glibc's own ceiling for the adaptive threshold, which setting `M_TOP_PAD` turns off.
pub const MMAP_THRESHOLD_BYTES: usize = 32 << 20;

/// The whole huge pages within the bytes `start..end`, as a start and a length; `None` when
/// no whole huge page fits.
pub fn huge_page_span(start: usize, end: usize) -> Option<(usize, usize)> {
    let first = start.checked_next_multiple_of(HUGE_PAGE_BYTES)?;
    let last = end / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
    (last > first).then(|| (first, last - first))
}

/// The bracketed choice in a kernel setting listed as `always [madvise] never`.
pub fn selected_choice(listing: &str) -> Option<&str> {
    let open = listing.find('[')?;
    let close = open + listing[open..].find(']')?;
    Some(&listing[open + 1..close])
}

/// Whether marking the heap changes anything here and costs nothing: huge pages served on
/// request only (in `always` mode the heap gets them unmarked, in `never` mode not at all),
/// and no strict overcommit accounting (which would charge the untouched reserve).
pub fn marking_helps(thp_enabled: &str, overcommit_memory: &str) -> bool {
    selected_choice(thp_enabled) == Some("madvise") && overcommit_memory.trim() != "2"
}

/// Grows the heap by a reserve marked for huge pages, once per process, when called on the
/// main thread (whose allocations the heap serves; other threads have arenas of their own)
/// of a glibc Linux process where [`marking_helps`]; else nothing. A step that fails leaves
/// the heap as it was.
pub fn prefer_huge_pages() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    if std::thread::current().name() == Some("main") {
        ONCE.call_once(reserve_and_mark);
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn reserve_and_mark() {
    let read = |path| std::fs::read_to_string(path).unwrap_or_default();
    if !marking_helps(
        &read("/sys/kernel/mm/transparent_hugepage/enabled"),
        &read("/proc/sys/vm/overcommit_memory"),
    ) {
        return;
    }
    // SAFETY: mallopt, sbrk(0), malloc and free are used as glibc documents them; the probe
    // block is freed at once and never read; madvise gets whole pages of the heap's own
    // mapping, and MADV_HUGEPAGE changes no contents.
    unsafe {
        if libc::mallopt(libc::M_TOP_PAD, RESERVE_BYTES as libc::c_int) == 0 {
            return;
        }
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES as libc::c_int);
        let start = libc::sbrk(0) as usize;
        // Opaque, for a compiler may drop a `malloc` whose block nobody uses, and with it the
        // growth this probe is for.
        let probe = std::hint::black_box(libc::malloc(HUGE_PAGE_BYTES));
        libc::free(probe);
        if let Some((first, length)) = huge_page_span(start, libc::sbrk(0) as usize) {
            libc::madvise(first as *mut libc::c_void, length, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn reserve_and_mark() {}
