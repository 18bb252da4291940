//! The binary's allocator: small allocations carved from one mapping (docs/benchmarks.md).

/// The `sandbox` binary's global allocator: small allocations are carved from one arena of
/// [`ARENA_SIZE`] bytes mapped on first use, and never freed or reused; larger ones, and every
/// one once the arena is used up, go to the system allocator.
///
/// Why: the shipped binary links musl, whose allocator unmaps memory as soon as a group of
/// small blocks is free. A one-shot `sandbox run`'s small allocations (argument parsing, the
/// profile's policy, its filter) cost about sixty `mmap` and forty `munmap` calls, each
/// `munmap` a page-table walk and, once the host has threads, a TLB flush on the other CPUs:
/// 0.34-0.55 ms of a run's CPU time (docs/benchmarks.md). The arena's cost is one mapping.
/// Its memory is bounded by its size, so a long-lived `sandbox serve` keeps flat memory: the
/// arena fills during its first requests, after which it allocates as before.
pub struct Arena;

/// The arena's size: larger than a one-shot run's small allocations (about 290 KiB under
/// `minimal` or `shell`, read from `ARENA_USED` at exit with gdb), smaller than a huge page
/// (so no transparent huge page backs it, whose first touch would clear 2 MiB).
pub const ARENA_SIZE: usize = 1 << 20;
/// Allocations above this size go to the system allocator (musl maps those by themselves).
pub(super) const ARENA_MAX_ALLOC: usize = 64 * 1024;
/// The arena's address: 0 before it is mapped, 1 when mapping it failed (the system
/// allocator then serves everything).
pub(super) static ARENA_BASE: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);
/// Bytes of the arena handed out (the offset of its free part).
pub(super) static ARENA_USED: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

impl Arena {
    /// The arena's address, mapped on first use; `None` when it cannot be.
    fn base() -> Option<usize> {
        use std::sync::atomic::Ordering;
        match ARENA_BASE.load(Ordering::Acquire) {
            0 => {}
            1 => return None,
            b => return Some(b),
        }
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches
        // no existing memory.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ARENA_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        let mapped = if p == libc::MAP_FAILED { 1 } else { p as usize };
        match ARENA_BASE.compare_exchange(0, mapped, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => (mapped != 1).then_some(mapped),
            Err(winner) => {
                if mapped != 1 {
                    // SAFETY: another thread's mapping won; this one was never handed out.
                    unsafe { libc::munmap(p, ARENA_SIZE) };
                }
                (winner != 1).then_some(winner)
            }
        }
    }

    /// Whether `p` was carved from the arena.
    fn holds(p: *mut u8) -> bool {
        let b = ARENA_BASE.load(std::sync::atomic::Ordering::Acquire);
        b > 1 && (p as usize) >= b && (p as usize) < b + ARENA_SIZE
    }

    /// `layout` carved from the arena, or null when it does not fit (any more). Not inlined:
    /// every allocation site would otherwise carry a copy (the binary grew by 7%).
    #[inline(never)]
    fn carve(layout: std::alloc::Layout) -> *mut u8 {
        use std::sync::atomic::Ordering;
        if layout.size() > ARENA_MAX_ALLOC {
            return std::ptr::null_mut();
        }
        let Some(base) = Arena::base() else {
            return std::ptr::null_mut();
        };
        let mut used = ARENA_USED.load(Ordering::Relaxed);
        loop {
            // Aligned as an address (an alignment may exceed the page the base is aligned to).
            let start = (base + used).next_multiple_of(layout.align()) - base;
            let end = start + layout.size();
            if end > ARENA_SIZE {
                return std::ptr::null_mut();
            }
            match ARENA_USED.compare_exchange_weak(used, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return (base + start) as *mut u8,
                Err(now) => used = now,
            }
        }
    }
}

// SAFETY: every block handed out is either carved from the arena (disjoint ranges, claimed
// with a compare-and-swap on the used offset, never handed out twice, valid for the life of
// the process) or comes from the system allocator, which then also gets it back; `holds`
// tells the two apart by address.
unsafe impl std::alloc::GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = Arena::carve(layout);
        if !p.is_null() {
            return p;
        }
        // SAFETY: the caller's layout, passed on as GlobalAlloc requires.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // Arena memory is fresh from an anonymous mapping and never reused: already zero.
        let p = Arena::carve(layout);
        if !p.is_null() {
            return p;
        }
        // SAFETY: as in `alloc`.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: std::alloc::Layout) {
        if !Arena::holds(p) {
            // SAFETY: not the arena's, so the system allocator's, with the caller's layout.
            unsafe { std::alloc::System.dealloc(p, layout) }
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        use std::sync::atomic::Ordering;
        if !Arena::holds(p) {
            // SAFETY: the system allocator's block, passed back with the caller's arguments.
            return unsafe { std::alloc::System.realloc(p, layout, new) };
        }
        if new <= layout.size() {
            // The block already holds the smaller size.
            return p;
        }
        // The last block carved grows in place (a growing Vec or String, the usual case).
        let offset = p as usize - ARENA_BASE.load(Ordering::Acquire);
        if new <= ARENA_MAX_ALLOC
            && offset + new <= ARENA_SIZE
            && ARENA_USED
                .compare_exchange(
                    offset + layout.size(),
                    offset + new,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            return p;
        }
        // SAFETY: GlobalAlloc::realloc's contract makes (new, align) a valid layout.
        let wanted = unsafe { std::alloc::Layout::from_size_align_unchecked(new, layout.align()) };
        // SAFETY: a valid layout of non-zero size (`new` is non-zero by the same contract).
        let q = unsafe { self.alloc(wanted) };
        if !q.is_null() {
            // SAFETY: both blocks are at least min(old, new) bytes and distinct (the arena
            // never hands a range out twice); the old one stays valid (arena blocks are never
            // freed).
            unsafe { std::ptr::copy_nonoverlapping(p, q, layout.size().min(new)) };
        }
        q
    }
}

#[cfg(test)]
mod arena_tests {
    use super::{Arena, ARENA_SIZE};
    use std::alloc::{GlobalAlloc, Layout};

    /// Blocks are aligned, distinct and keep their contents through growth; once the arena is
    /// used up the system allocator serves (and takes back) what comes next.
    #[test]
    fn the_arena_carves_aligned_blocks_and_then_hands_over() {
        let a = Arena;
        let l = |size, align| Layout::from_size_align(size, align).unwrap();
        // SAFETY: valid non-zero layouts; every block is used within its size and given back
        // with the layout it has.
        unsafe {
            let p = a.alloc(l(3, 1));
            let q = a.alloc(l(64, 4096));
            assert!(Arena::holds(p) && Arena::holds(q));
            assert_eq!(q as usize % 4096, 0);
            assert!(q as usize >= p as usize + 3);
            std::ptr::write_bytes(q, 7, 64);
            // The last block grows in place; another one moves and keeps its bytes.
            assert_eq!(a.realloc(q, l(64, 4096), 128), q);
            let r = a.realloc(p, l(3, 1), 100);
            assert!(r != p && Arena::holds(r));
            let z = a.alloc_zeroed(l(256, 8));
            assert!((0..256).all(|i| *z.add(i) == 0));
            assert_eq!(*q.add(63), 7);
            // Too large for the arena: the system's, freed by it.
            let big = a.alloc(l(1 << 20, 8));
            assert!(!big.is_null() && !Arena::holds(big));
            a.dealloc(big, l(1 << 20, 8));
            // Use it up: then everything is the system's.
            while Arena::holds(a.alloc(l(60 * 1024, 8))) {}
            while Arena::holds(a.alloc(l(16, 8))) {}
            let after = a.alloc(l(16, 8));
            assert!(!after.is_null() && !Arena::holds(after));
            *after = 1;
            a.dealloc(after, l(16, 8));
            assert!(super::ARENA_USED.load(std::sync::atomic::Ordering::Relaxed) <= ARENA_SIZE);
        }
    }
}
