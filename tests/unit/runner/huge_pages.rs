//! Unit tests of `blis_cosim::runner::huge_pages`.

use blis_cosim::runner::huge_pages::*;

const MIB: usize = 1 << 20;

#[test]
fn the_span_holds_the_whole_huge_pages_inside_the_range_only() {
    // A heap from 1 MiB past a boundary to 6.5 MiB past it: the pages at 2 and 4 MiB; to
    // 5.5 MiB past it, the page at 2 MiB alone.
    let base = 64 * HUGE_PAGE_BYTES;
    assert_eq!(
        huge_page_span(base + MIB, base + 6 * MIB + MIB / 2),
        Some((base + 2 * MIB, 2 * HUGE_PAGE_BYTES))
    );
    assert_eq!(
        huge_page_span(base + MIB, base + 5 * MIB + MIB / 2),
        Some((base + 2 * MIB, HUGE_PAGE_BYTES))
    );
    // Bounds on a boundary are kept.
    assert_eq!(
        huge_page_span(base, base + HUGE_PAGE_BYTES),
        Some((base, HUGE_PAGE_BYTES))
    );
    // No whole page: none, however close.
    assert_eq!(huge_page_span(base + 1, base + HUGE_PAGE_BYTES + 1), None);
    assert_eq!(huge_page_span(base + MIB, base + MIB), None);
    assert_eq!(huge_page_span(base + MIB, base), None);
    // A start past the last boundary the address space has.
    assert_eq!(huge_page_span(usize::MAX - 5, usize::MAX), None);
}

#[test]
fn the_heap_is_marked_only_where_huge_pages_come_on_request_and_commit_is_not_strict() {
    assert_eq!(selected_choice("always [madvise] never\n"), Some("madvise"));
    assert_eq!(selected_choice("[always] madvise never"), Some("always"));
    assert_eq!(selected_choice(""), None);
    assert_eq!(selected_choice("always madvise [never"), None);
    assert!(marking_helps("always [madvise] never\n", "0\n"));
    assert!(marking_helps("always [madvise] never\n", "1"));
    assert!(!marking_helps("always [madvise] never\n", "2\n"));
    assert!(!marking_helps("[always] madvise never\n", "0\n"));
    assert!(!marking_helps("always madvise [never]\n", "0\n"));
    // Unreadable settings (no such files off Linux, or hidden in a container) read as empty.
    assert!(!marking_helps("", ""));
}

/// Whether some mapping of the heap is marked for huge pages (`hg` among its `VmFlags`), or
/// `None` where `/proc/self/smaps` cannot be read.
fn heap_marked() -> Option<bool> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut in_heap = false;
    let mut marked = false;
    for line in smaps.lines() {
        if let Some(flags) = line.strip_prefix("VmFlags:") {
            marked |= in_heap && flags.split_whitespace().any(|flag| flag == "hg");
        } else if line.contains('-') && line.split_whitespace().count() >= 5 {
            in_heap = line.ends_with("[heap]");
        }
    }
    Some(marked)
}

#[test]
fn a_thread_other_than_the_main_one_leaves_the_heap_alone() {
    // Test threads are named after their test, and their allocations come from arenas of
    // their own: the heap must stay unmarked.
    let Some(before) = heap_marked() else {
        eprintln!("skipped: /proc/self/smaps cannot be read here");
        return;
    };
    prefer_huge_pages();
    assert_eq!(heap_marked(), Some(before));
    assert!(!before, "nothing in the unit tests marks the heap");
}
