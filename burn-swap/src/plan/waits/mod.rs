//! Cross-stream waits.
//!
//! Work runs on several queues at once: the compute queue, the send queue that copies tensors
//! to the host, the receive queue that copies them back (on CUDA each is a stream of its own).
//! A queue runs its nodes in order; two queues run in any order relative to each other unless
//! a *wait* orders them. For every buffer, whenever a node touches it after a node of another
//! queue touched it and one of the two writes or frees it, the later node must wait for the
//! earlier one: a read waits for the write that made the data (a true dependence), a write or
//! a free waits for the reads still under way (the buffer-release hazard: a buffer freed on
//! one queue while another queue still reads it).
//!
//! [`waits`] inserts the waits, leaving out those already implied by queue order and earlier
//! waits (vector clocks). [`check`] is the independent judge: it takes any set of waits and
//! names the first pair of conflicting touches left unordered. [`timeline`] lays out the
//! nodes the executor issues when it follows a [`Program`] over two iterations of a trace
//! (the second catches what a carried tensor's plan does across the boundary).
//!
//! Pure: no device, no clock. The executor realises each kind of wait (see [`Node`]):
//! compute waits for a planned fetch before the op that uses it; a device copy is released
//! only after its offload reported completion; a copy queue reads only what compute has
//! issued before (on CubeCL, the backend makes the copy stream wait on the producer's event).

use hashbrown::HashMap;

use super::program::{Port, Program, Step};
use crate::trace::Trace;

/// A queue of work, in order within itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Queue {
    /// The ops of the model, and the releases and recomputations the executor does between
    /// them.
    Compute,
    /// Copies to the host (the send worker, or its stream).
    Send,
    /// Copies back to the device (the receive worker, or its stream).
    Receive,
}

impl Queue {
    /// Every queue.
    pub const ALL: [Queue; 3] = [Queue::Compute, Queue::Send, Queue::Receive];

    fn index(self) -> usize {
        match self {
            Queue::Compute => 0,
            Queue::Send => 1,
            Queue::Receive => 2,
        }
    }
}

/// A buffer: one tensor's copy on the device or on the host. `tensor` is a key unique over the
/// timeline (see [`timeline`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Buffer {
    /// The device copy.
    Device(u64),
    /// The host copy.
    Host(u64),
}

/// What a node does to a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touch {
    /// Reads it.
    Read,
    /// Writes it (makes its data).
    Write,
    /// Gives its memory back.
    Free,
}

/// What a node of a [`timeline`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    /// Op number `op` of the timeline (position `op % period` of the iteration).
    Op(usize),
    /// An end of life: Burn let go of the tensor after an op.
    End,
    /// The recomputation of an evicted tensor before its use.
    Recompute,
    /// An eviction (the device copy dropped; it is recomputed later).
    Evict,
    /// The copy of a tensor to the host (offload `tag`).
    Offload(u32),
    /// The release of a device copy whose offload finished.
    Release,
    /// The copy back of offload `tag`.
    Prefetch(u32),
    /// A node of a hand-built timeline.
    Other,
}

/// One piece of work on one queue and the buffers it touches.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Where it runs.
    pub queue: Queue,
    /// What it is.
    pub what: What,
    /// The buffers it touches, and how.
    pub touches: Vec<(Buffer, Touch)>,
}

impl Node {
    /// A node of a hand-built timeline.
    pub fn new(queue: Queue, touches: &[(Buffer, Touch)]) -> Self {
        Self {
            queue,
            what: What::Other,
            touches: touches.to_vec(),
        }
    }
}

/// Node `before` may start only after node `after` (on another queue) finished, because of
/// `buffer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    /// The waiting node.
    pub before: usize,
    /// The node waited for; it comes earlier in the timeline.
    pub after: usize,
    /// The buffer both touch.
    pub buffer: Buffer,
}

/// Two touches of one buffer that no queue order or wait orders.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Hazard {
    /// A later node may run before an earlier conflicting one.
    #[error(
        "node {later} ({later_touch:?} on {later_queue:?}) may run before node {earlier} \
         ({earlier_touch:?} on {earlier_queue:?}) on {buffer:?}"
    )]
    Unordered {
        /// The earlier node.
        earlier: usize,
        /// Its queue.
        earlier_queue: Queue,
        /// How it touches the buffer.
        earlier_touch: Touch,
        /// The later node.
        later: usize,
        /// Its queue.
        later_queue: Queue,
        /// How it touches the buffer.
        later_touch: Touch,
        /// The buffer.
        buffer: Buffer,
    },
    /// A wait names a node that is not earlier than the waiting one.
    #[error("wait {0:?} does not point back in the timeline")]
    Backwards(Wait),
}

/// Per queue, how many of its nodes are known finished.
type Clock = [u32; 3];

fn join(a: &mut Clock, b: &Clock) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = (*x).max(*y);
    }
}

/// Node clocks: what each node knows finished when it starts, and its number on its queue.
struct Clocks {
    seq: Vec<u32>,
    finished: Vec<Clock>,
    queue_tip: [Clock; 3],
    queue_len: [u32; 3],
}

impl Clocks {
    fn new(len: usize) -> Self {
        Self {
            seq: Vec::with_capacity(len),
            finished: Vec::with_capacity(len),
            queue_tip: [[0; 3]; 3],
            queue_len: [0; 3],
        }
    }

    /// Whether node `a` is finished before node `b` (on `b`'s queue, as it starts) runs.
    fn before(&self, nodes: &[Node], a: usize, start_of_b: &Clock) -> bool {
        start_of_b[nodes[a].queue.index()] > self.seq[a]
    }

    /// What the next node on `queue` knows finished as it starts, before its waits.
    fn start(&self, queue: Queue) -> Clock {
        self.queue_tip[queue.index()]
    }

    /// Finishes the next node on `queue`, which started knowing `start`.
    fn finish(&mut self, queue: Queue, mut start: Clock) {
        let q = queue.index();
        let seq = self.queue_len[q];
        self.queue_len[q] += 1;
        start[q] = seq + 1;
        self.seq.push(seq);
        self.finished.push(start);
        self.queue_tip[q] = start;
    }
}

/// The waits that order every conflicting pair of touches in `nodes` (issue order), leaving
/// out those that queue order and earlier waits already imply.
pub fn waits(nodes: &[Node]) -> Vec<Wait> {
    let _span = tracing::debug_span!("burn_swap::plan_waits", nodes = nodes.len()).entered();
    // Per buffer: the last node that wrote or freed it, and the nodes that read it since.
    let mut last_write: HashMap<Buffer, usize> = HashMap::new();
    let mut readers: HashMap<Buffer, Vec<usize>> = HashMap::new();
    let mut clocks = Clocks::new(nodes.len());
    let mut out = Vec::new();
    let mut needs = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        let mut start = clocks.start(node.queue);
        needs.clear();
        for &(buffer, touch) in &node.touches {
            if let Some(&w) = last_write.get(&buffer) {
                needs.push((w, buffer));
            }
            if touch != Touch::Read
                && let Some(rs) = readers.get(&buffer)
            {
                needs.extend(rs.iter().map(|&r| (r, buffer)));
            }
        }
        // Latest first: waiting for a later node of a queue covers its earlier ones.
        needs.sort_by_key(|&(earlier, _)| core::cmp::Reverse(earlier));
        for &(earlier, buffer) in &needs {
            if earlier == n || clocks.before(nodes, earlier, &start) {
                continue;
            }
            out.push(Wait {
                before: n,
                after: earlier,
                buffer,
            });
            join(&mut start, &clocks.finished[earlier]);
        }
        clocks.finish(node.queue, start);
        for &(buffer, touch) in &node.touches {
            match touch {
                Touch::Read => readers.entry(buffer).or_default().push(n),
                Touch::Write | Touch::Free => {
                    last_write.insert(buffer, n);
                    if let Some(rs) = readers.get_mut(&buffer) {
                        rs.clear();
                    }
                }
            }
        }
    }
    out
}

/// Checks that `waits` order every pair of conflicting touches in `nodes` (every pair of
/// touches of one buffer, at least one not a read, by different nodes): the first pair left
/// unordered, or a wait that points forward, is the error.
pub fn check(nodes: &[Node], waits: &[Wait]) -> Result<(), Hazard> {
    let mut waited: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for w in waits {
        if w.after >= w.before || w.before >= nodes.len() {
            return Err(Hazard::Backwards(*w));
        }
        waited[w.before].push(w.after);
    }
    let mut clocks = Clocks::new(nodes.len());
    let mut starts = Vec::with_capacity(nodes.len());
    for (n, node) in nodes.iter().enumerate() {
        let mut start = clocks.start(node.queue);
        for &a in &waited[n] {
            join(&mut start, &clocks.finished[a]);
        }
        starts.push(start);
        clocks.finish(node.queue, start);
    }
    // Every touch of every buffer, in order; each conflicting pair must be ordered.
    let mut touches: HashMap<Buffer, Vec<(usize, Touch)>> = HashMap::new();
    for (n, node) in nodes.iter().enumerate() {
        for &(buffer, touch) in &node.touches {
            touches.entry(buffer).or_default().push((n, touch));
        }
    }
    let mut found: Option<Hazard> = None;
    for (buffer, list) in &touches {
        for (j, &(b, tb)) in list.iter().enumerate() {
            for &(a, ta) in &list[..j] {
                if a == b || (ta == Touch::Read && tb == Touch::Read) {
                    continue;
                }
                if !clocks.before(nodes, a, &starts[b]) {
                    let hazard = Hazard::Unordered {
                        earlier: a,
                        earlier_queue: nodes[a].queue,
                        earlier_touch: ta,
                        later: b,
                        later_queue: nodes[b].queue,
                        later_touch: tb,
                        buffer: *buffer,
                    };
                    // The earliest later node, so that the answer does not depend on hashing.
                    let earliest = match &found {
                        Some(Hazard::Unordered { later, earlier, .. }) => {
                            (b, a) < (*later, *earlier)
                        }
                        _ => true,
                    };
                    if earliest {
                        found = Some(hazard);
                    }
                }
            }
        }
    }
    found.map_or(Ok(()), Err)
}

/// Where a tensor is while the timeline is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Device,
    Host,
    Evicted,
    Gone,
}

/// The nodes the executor issues when it follows `program` over two iterations of `trace`, in
/// issue order. Tensors are keyed per iteration (`iteration · tensors + index`), except that
/// a carried tensor (`wraps_to`) keeps its key into the next iteration.
pub fn timeline(trace: &Trace, program: &Program) -> Vec<Node> {
    let period = trace.ops.len().min(program.period);
    let count = trace.tensors.len() as u64;
    // Tensors ending after each op.
    let mut ends: Vec<Vec<usize>> = vec![Vec::new(); period];
    for (i, t) in trace.tensors.iter().enumerate() {
        if let Some(end) = t.end
            && end.op < period
        {
            ends[end.op].push(i);
        }
    }
    let mut layout = Layout {
        trace,
        index_of: trace.tensor_indices(),
        key: (0..count).collect(),
        place: HashMap::new(),
        tags: HashMap::new(),
        nodes: Vec::new(),
    };
    for iteration in 0..2usize {
        if iteration == 1 {
            layout.next_iteration();
        }
        for (k, ended) in ends.iter().enumerate() {
            layout.op(k, iteration * period + k);
            for step in program.after.get(k).map_or(&[][..], |s| &s[..]) {
                layout.step(k, *step);
            }
            layout.end(ended);
        }
    }
    layout.nodes
}

/// The state of [`timeline`] while it lays out the nodes.
struct Layout<'a> {
    trace: &'a Trace,
    index_of: HashMap<u64, usize>,
    /// Each tensor's key in the iteration being laid out.
    key: Vec<u64>,
    place: HashMap<u64, Place>,
    /// Offloaded tensors by tag, until their prefetch.
    tags: HashMap<u32, u64>,
    nodes: Vec<Node>,
}

impl Layout<'_> {
    /// The next iteration's tensors: new keys, but carried tensors keep theirs.
    fn next_iteration(&mut self) {
        let count = self.key.len() as u64;
        let mut next: Vec<u64> = (0..count).map(|i| count + i).collect();
        for (i, t) in self.trace.tensors.iter().enumerate() {
            if let Some(j) = t.wraps_to
                && j < next.len()
            {
                next[j] = self.key[i];
            }
        }
        self.key = next;
    }

    fn push(&mut self, queue: Queue, what: What, touches: Vec<(Buffer, Touch)>) {
        self.nodes.push(Node {
            queue,
            what,
            touches,
        });
    }

    /// Op `k` of the iteration (numbered `at` over both), after recomputing any evicted
    /// input.
    fn op(&mut self, k: usize, at: usize) {
        let op = &self.trace.ops[k];
        let mut touches = Vec::new();
        for id in &op.inputs {
            let Some(&i) = self.index_of.get(id) else {
                continue;
            };
            let t = self.key[i];
            if self.place.get(&t) == Some(&Place::Evicted) {
                let write = vec![(Buffer::Device(t), Touch::Write)];
                self.push(Queue::Compute, What::Recompute, write);
                self.place.insert(t, Place::Device);
            }
            touches.push((Buffer::Device(t), Touch::Read));
        }
        for id in &op.outputs {
            let Some(&i) = self.index_of.get(id) else {
                continue;
            };
            touches.push((Buffer::Device(self.key[i]), Touch::Write));
            self.place.insert(self.key[i], Place::Device);
        }
        self.push(Queue::Compute, What::Op(at), touches);
    }

    /// The resident tensor at a port of op `k` (offloads and evictions skip others).
    fn resident(&self, k: usize, port: Port) -> Option<u64> {
        let o = &self.trace.ops[k];
        let id = match port {
            Port::Input(i) => *o.inputs.get(i as usize)?,
            Port::Output(i) => *o.outputs.get(i as usize)?,
        };
        let t = self.key[*self.index_of.get(&id)?];
        (self.place.get(&t) == Some(&Place::Device)).then_some(t)
    }

    /// One step of the program after op `k`.
    fn step(&mut self, k: usize, step: Step) {
        match step {
            Step::Offload { port, tag, inline } => {
                let Some(t) = self.resident(k, port) else {
                    return;
                };
                let copy = vec![
                    (Buffer::Device(t), Touch::Read),
                    (Buffer::Host(t), Touch::Write),
                ];
                // A copy made on the op thread runs in the compute queue's order.
                let queue = if inline { Queue::Compute } else { Queue::Send };
                self.push(queue, What::Offload(tag), copy);
                let free = vec![(Buffer::Device(t), Touch::Free)];
                self.push(Queue::Compute, What::Release, free);
                self.place.insert(t, Place::Host);
                self.tags.insert(tag, t);
            }
            Step::Evict { port } => {
                let Some(t) = self.resident(k, port) else {
                    return;
                };
                let free = vec![(Buffer::Device(t), Touch::Free)];
                self.push(Queue::Compute, What::Evict, free);
                self.place.insert(t, Place::Evicted);
            }
            Step::Prefetch { tag, inline } => {
                let Some(t) = self.tags.remove(&tag) else {
                    return;
                };
                if self.place.get(&t) != Some(&Place::Host) {
                    return;
                }
                let fetch = vec![
                    (Buffer::Host(t), Touch::Read),
                    (Buffer::Device(t), Touch::Write),
                    (Buffer::Host(t), Touch::Free),
                ];
                let queue = if inline {
                    Queue::Compute
                } else {
                    Queue::Receive
                };
                self.push(queue, What::Prefetch(tag), fetch);
                self.place.insert(t, Place::Device);
            }
        }
    }

    /// The tensors whose lives end after the op (carried ones live on).
    fn end(&mut self, ended: &[usize]) {
        for &i in ended {
            if self.trace.tensors[i].wraps_to.is_some() {
                continue;
            }
            let t = self.key[i];
            let buffer = match self.place.get(&t) {
                Some(Place::Device) => Buffer::Device(t),
                Some(Place::Host) => Buffer::Host(t),
                _ => continue,
            };
            self.push(Queue::Compute, What::End, vec![(buffer, Touch::Free)]);
            self.place.insert(t, Place::Gone);
        }
    }
}

/// Per op position of the iteration, the planned fetches (by tag) that compute must wait for
/// before the op runs, as the executor realises them.
///
/// [`waits`] takes a release on the compute queue to wait for its offload, and leaves out a
/// compute wait for a fetch that such a chain already orders (compute waited for a release,
/// whose offload waited for a fetch that freed the host copy it writes). The executor does not
/// block compute for a release: it drops the device copy when the send worker's report of
/// the finished copy lands, between ops. So the waits here are derived from the
/// [`timeline`] with the orderings the executor does keep, and no other: compute's own
/// order, the receive queue's order (a wait for a fetch covers every fetch queued before
/// it), and compute's earlier waits. Every op that reads a device copy written by a fetch
/// on the receive queue waits for that fetch, unless compute already waited for it or for
/// one queued after it.
pub fn fetch_waits(trace: &Trace, program: &Program) -> Vec<Vec<u32>> {
    let nodes = timeline(trace, program);
    let period = program.period.max(1);
    let mut before = vec![Vec::new(); program.period];
    // The fetch that last wrote each device copy: its place in the receive queue and tag.
    let mut written_by: HashMap<Buffer, (usize, u32)> = HashMap::new();
    let mut received = 0usize;
    // How far along the receive queue compute has waited.
    let mut awaited: Option<usize> = None;
    for node in &nodes {
        match (node.queue, node.what) {
            (Queue::Receive, What::Prefetch(tag)) => {
                for &(buffer, touch) in &node.touches {
                    if touch == Touch::Write {
                        written_by.insert(buffer, (received, tag));
                    }
                }
                received += 1;
            }
            (Queue::Receive, _) => received += 1,
            (Queue::Compute, What::Op(op)) => {
                for &(buffer, touch) in &node.touches {
                    let Some(&(at, tag)) = written_by.get(&buffer) else {
                        continue;
                    };
                    if touch != Touch::Read || awaited.is_some_and(|a| a >= at) {
                        continue;
                    }
                    let slot: &mut Vec<u32> = &mut before[op % period];
                    if !slot.contains(&tag) {
                        slot.push(tag);
                    }
                    awaited = Some(awaited.map_or(at, |a| a.max(at)));
                }
            }
            _ => {}
        }
    }
    before
}

#[cfg(test)]
mod tests;
