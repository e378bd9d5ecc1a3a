//! Cache warming: hints that bring memory the next step of an instance will touch into the
//! CPU cache before it is touched. With hundreds of instances taking turns, an instance's
//! state is cold at each of its steps; the engine knows which instance steps next (the
//! event queue's earliest step end) and warms its state one event ahead, so that the loads
//! of its step overlap the work of the one before. A hint changes no value: outputs are the
//! same with or without it.

/// Instances above which the loop warms the CPU cache for the instance whose step ends next,
/// one event ahead (the engine's `Cluster::warm_next`; the CSV writer warms its rows above it too). Warming pays once the instances' state no longer
/// stays in the caches between two steps of one instance, and costs its own work before:
/// on the BLIS spec at 20 requests/s per instance (whole-process pairs, CPU, 2-core AMD EPYC with
/// 1 MiB of L2 per core and 32 MiB of L3, shared machine) it cost 2-4 % at 16, 32, 64 and
/// 128 instances and saved 8-11 % at 192, 256 and 512. A machine with larger caches moves the
/// point up, a smaller one down; the outputs are the same either way.
pub const WARM_ABOVE: usize = 128;

/// The bytes of one cache line.
const LINE: usize = 64;

/// Hints that the cache line holding `at` is read soon.
#[inline(always)]
pub(crate) fn line<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch is a hint: it never faults and reads nothing the program sees,
        // whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Hints that every cache line of `value` is read soon.
#[inline(always)]
pub(crate) fn value<T>(value: &T) {
    bytes(std::ptr::from_ref(value).cast::<u8>(), size_of::<T>());
}

/// Hints that every cache line of `slice` is read soon.
#[inline(always)]
pub(crate) fn slice<T>(slice: &[T]) {
    bytes(slice.as_ptr().cast::<u8>(), size_of_val(slice));
}

/// Hints that the `len` bytes from `start` are read soon.
#[inline(always)]
fn bytes(start: *const u8, len: usize) {
    let mut off = 0;
    while off < len {
        line(start.wrapping_add(off));
        off += LINE;
    }
    if len > 0 {
        line(start.wrapping_add(len - 1));
    }
}

impl super::Scheduler {
    /// Warms what the instance's next step end and step touch first and cannot find ahead
    /// by itself: the first stretch member the step end finishes (the member and its
    /// request), the stretch bucket that takes new blocks (its members and the ends of their
    /// block lists), and the step and its batch.
    pub(crate) fn warm(&self) {
        self.stretch
            .warm_finishing(self.step_finish_ns.count(), &self.slots);
        let bs = u64::from(self.config.block_size.max(1));
        self.stretch.warm(((self.formed + 1) % bs) as usize);
        slice(&self.step_items);
        slice(&self.step);
    }
}
