//! In steady state parsing and encoding allocate nothing: the span table and the
//! inline scratch buffer are reused, and replies go into a buffer with room.
//! This file holds a single test so the counting allocator sees only it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use ruvio_resp::{CommandParser, Limits, Parsed, Protocol, Reply};

struct Counting;

thread_local! {
    /// Allocations made by this thread; the test harness's own threads do not count.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count_one() {
    // Fails only while the thread is being torn down; nothing to count then.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: defers to the system allocator; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Parse every command in `stream` and answer each, returning how many there were.
fn serve(parser: &mut CommandParser, stream: &[u8], out: &mut Vec<u8>) -> usize {
    let limits = Limits::default();
    let mut offset = 0;
    let mut commands = 0;
    while let Ok(Parsed::Complete { args, consumed }) = parser.parse(&stream[offset..], &limits) {
        let mut reply = Reply::new(out, Protocol::Resp3);
        reply.array(args.len());
        for arg in args.iter() {
            reply.bulk(arg);
        }
        reply.double(0.1);
        reply.int(-5);
        offset += consumed;
        commands += 1;
    }
    commands
}

#[test]
fn steady_state_allocates_nothing() {
    let stream: &[u8] = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n\
        *2\r\n$3\r\nGET\r\n$3\r\nkey\r\n\
        SET \"quoted key\" 'v'\r\n\
        PING\r\n";
    let mut parser = CommandParser::new();
    let mut out = Vec::with_capacity(1 << 20);
    assert_eq!(serve(&mut parser, stream, &mut out), 4);
    out.clear();
    let before = allocations();
    for _ in 0..1000 {
        assert_eq!(serve(&mut parser, stream, &mut out), 4);
        out.clear();
    }
    assert_eq!(allocations() - before, 0);
}
