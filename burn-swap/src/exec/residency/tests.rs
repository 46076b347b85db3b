//! The residency's transitions, one test each: the books always equal what the entries add
//! up to.

use super::*;
use burn_backend::{DType, TensorData};
use burn_ir::{OperationIr, TensorStatus};

fn id(n: u64) -> TensorId {
    TensorId::new(n)
}

/// A residency of three f32 tensors of 100, 200 and 300 elements.
fn three() -> Residency {
    let mut r = Residency::default();
    for (n, len) in [(1, 100), (2, 200), (3, 300)] {
        r.admit(id(n), Entry::new(Dims::from_slice(&[len]), DType::F32, 0));
    }
    r
}

fn copy(bytes: usize) -> HostCopy {
    HostCopy::Raw(TensorData::new(vec![0u8; bytes], [bytes]))
}

/// The books equal what the entries add up to.
fn check(r: &Residency) -> Books {
    let (resident, host, offloading) = r.recount();
    let books = *r.books();
    assert_eq!(
        (books.resident, books.host, books.offloading),
        (resident, host, offloading)
    );
    assert!(books.peak >= books.resident && books.peak_host >= books.host);
    books
}

#[test]
fn admit_and_remove_keep_the_books() {
    let mut r = three();
    assert_eq!(check(&r).resident, 2400);
    assert_eq!(r.remove(&id(2)).map(|e| e.bytes()), Some(800));
    let books = check(&r);
    assert_eq!((books.resident, books.peak), (1600, 2400));
    assert!(r.remove(&id(2)).is_none());
}

#[test]
fn admitting_an_id_again_replaces_its_entry_in_the_books() {
    let mut r = three();
    r.complete_offload(&id(1), copy(100)).ok();
    r.admit(id(1), Entry::new(Dims::from_slice(&[10]), DType::F32, 1));
    let books = check(&r);
    assert_eq!((books.resident, books.host), (2040, 0));
}

#[test]
fn offload_begin_complete_moves_bytes_to_the_host() {
    let mut r = three();
    assert!(r.begin_offload(&id(1)));
    assert!(!r.begin_offload(&id(1)), "already offloading");
    assert_eq!(check(&r).offloading, 400);
    assert!(r.complete_offload(&id(1), copy(150)).is_ok());
    let books = check(&r);
    assert_eq!(
        (books.resident, books.host, books.offloading),
        (2000, 150, 0)
    );
    assert!(matches!(
        r.get(&id(1)).unwrap().state(),
        State::Offloaded(_)
    ));
    assert!(r.is_absent(&id(1)));
}

#[test]
fn offload_made_on_the_ops_thread_goes_straight_from_resident() {
    let mut r = three();
    assert!(r.complete_offload(&id(3), copy(1200)).is_ok());
    assert_eq!(check(&r).host, 1200);
    assert!(
        r.complete_offload(&id(3), copy(1)).is_err(),
        "already offloaded"
    );
}

#[test]
fn cancelled_offload_stays_resident() {
    let mut r = three();
    assert!(r.begin_offload(&id(2)));
    assert!(r.cancel_offload(&id(2)));
    assert!(!r.cancel_offload(&id(2)));
    let books = check(&r);
    assert_eq!((books.resident, books.offloading), (2400, 0));
    assert!(matches!(r.get(&id(2)).unwrap().state(), State::Resident));
}

#[test]
fn removing_a_tensor_in_flight_takes_it_off_every_count() {
    let mut r = three();
    r.begin_offload(&id(1));
    r.complete_offload(&id(2), copy(10)).ok();
    r.remove(&id(1));
    r.remove(&id(2));
    let books = check(&r);
    assert_eq!((books.resident, books.host, books.offloading), (1200, 0, 0));
}

#[test]
fn fetch_begin_complete_counts_device_bytes_from_the_start() {
    let mut r = three();
    r.complete_offload(&id(2), copy(500)).ok();
    let copy = r.begin_fetch(&id(2)).expect("offloaded");
    assert_eq!(copy.bytes(), 500);
    assert!(r.begin_fetch(&id(2)).is_none(), "already fetching");
    let books = check(&r);
    assert_eq!((books.resident, books.host), (2400, 0));
    assert!(r.is_absent(&id(2)), "a use waits for the fetch");
    assert!(r.complete_fetch(&id(2)));
    assert!(!r.is_absent(&id(2)));
    check(&r);
}

#[test]
fn restored_fetch_gives_the_host_its_copy_back() {
    let mut r = three();
    r.complete_offload(&id(1), copy(400)).ok();
    let taken = r.begin_fetch(&id(1)).unwrap();
    r.restore_fetch(&id(1), *taken);
    let books = check(&r);
    assert_eq!((books.resident, books.host), (2000, 400));
    assert!(matches!(
        r.get(&id(1)).unwrap().state(),
        State::Offloaded(_)
    ));
}

#[test]
fn failed_fetch_is_lost_without_a_recipe_and_evicted_with_one() {
    let mut r = three();
    r.get_mut(&id(1)).unwrap().recipe = Some(Box::new(Recipe {
        op: OperationIr::Drop(r.get(&id(3)).unwrap().ir(id(3), TensorStatus::ReadOnly)),
        inputs: vec![],
    }));
    for n in [1, 2] {
        r.complete_offload(&id(n), copy(8)).ok();
        r.begin_fetch(&id(n));
        r.fail_fetch(&id(n));
    }
    assert!(matches!(r.get(&id(1)).unwrap().state(), State::Evicted));
    assert!(matches!(r.get(&id(2)).unwrap().state(), State::Lost));
    let books = check(&r);
    assert_eq!((books.resident, books.host), (1200, 0));
}

#[test]
fn evict_needs_a_recipe_and_rematerialise_brings_the_bytes_back() {
    let mut r = three();
    assert!(!r.evict(&id(3)), "no recipe");
    r.get_mut(&id(3)).unwrap().recipe = Some(Box::new(Recipe {
        op: OperationIr::Drop(r.get(&id(1)).unwrap().ir(id(1), TensorStatus::ReadOnly)),
        inputs: vec![id(1)],
    }));
    assert!(r.evict(&id(3)));
    assert_eq!(check(&r).resident, 1200);
    assert!(!r.evict(&id(3)));
    assert!(r.rematerialise(&id(3)));
    assert!(!r.rematerialise(&id(3)));
    assert_eq!(check(&r).resident, 2400);
}

/// An orphan the device holds gives up its recipe (its inputs are the caller's to unpin), so
/// that orphans do not pin orphans step after step; an evicted one keeps it to come back.
#[test]
fn an_orphan_gives_up_its_recipe_unless_it_is_evicted() {
    let mut r = three();
    for n in [2, 3] {
        r.get_mut(&id(n)).unwrap().recipe = Some(Box::new(Recipe {
            op: OperationIr::Drop(r.get(&id(1)).unwrap().ir(id(1), TensorStatus::ReadOnly)),
            inputs: vec![id(1)],
        }));
        r.pin(&id(1));
        r.pin(&id(n));
    }
    assert!(r.evict(&id(3)));
    match r.remove_unless_pinned(&id(2)) {
        LetGo::Orphaned(Some(recipe)) => assert_eq!(recipe.inputs, vec![id(1)]),
        _ => panic!("a resident orphan gives up its recipe"),
    }
    assert!(
        r.get(&id(2))
            .is_some_and(|e| e.orphan && e.recipe.is_none())
    );
    assert!(matches!(
        r.remove_unless_pinned(&id(3)),
        LetGo::Orphaned(None)
    ));
    assert!(
        r.get(&id(3))
            .is_some_and(|e| e.orphan && e.recipe.is_some())
    );
    check(&r);
}

fn with_recipe(r: &mut Residency, n: u64) {
    r.get_mut(&id(n)).unwrap().recipe = Some(Box::new(Recipe {
        op: OperationIr::Drop(r.get(&id(n)).unwrap().ir(id(n), TensorStatus::ReadOnly)),
        inputs: vec![],
    }));
}

#[test]
fn a_view_sharing_a_buffer_costs_no_bytes_and_holds_the_buffer() {
    let mut r = three();
    // 4 is a 300-element view of 3's buffer (1,200 bytes).
    r.admit(id(4), Entry::new(Dims::from_slice(&[300]), DType::F32, 1));
    assert_eq!(check(&r).resident, 3600);
    assert_eq!(r.share(&id(4), Some(&id(3)), 7, 1200), -1200);
    assert_eq!(check(&r).resident, 2400);
    assert_eq!(r.share(&id(4), Some(&id(3)), 7, 1200), 0, "shared already");
    let buffer = r.get(&id(3)).unwrap().shared().unwrap();
    assert_eq!(r.get(&id(4)).unwrap().shared(), Some(buffer));
    assert_eq!(r.buffer(buffer).map(|s| s.holders), Some(2));
    assert_eq!(r.counted(r.get(&id(4)).unwrap()), 1200);
    // Burn lets go of the source: the view still holds the whole buffer.
    r.remove(&id(3));
    assert_eq!(check(&r).resident, 2400);
    // A view of the view, made when its source is gone, joins the buffer by its key.
    r.admit(id(6), Entry::new(Dims::from_slice(&[30]), DType::F32, 2));
    assert_eq!(r.share(&id(6), None, 7, 1200), -120);
    assert_eq!(r.buffer(buffer).map(|s| s.holders), Some(2));
    r.remove(&id(6));
    r.remove(&id(4));
    assert_eq!(check(&r).resident, 1200);
    assert!(!r.any_shared());
}

#[test]
fn a_view_admitted_into_a_shared_buffer_never_counts_towards_the_peak() {
    let mut r = three();
    r.reset_peaks();
    r.admit_view(
        id(4),
        Entry::new(Dims::from_slice(&[300]), DType::F32, 1),
        Some(&id(3)),
        7,
        1200,
    );
    let books = check(&r);
    assert_eq!((books.resident, books.peak), (2400, 2400));
}

#[test]
fn a_shared_buffer_leaves_the_device_with_its_last_holder() {
    let mut r = three();
    r.admit(id(4), Entry::new(Dims::from_slice(&[300]), DType::F32, 1));
    r.admit(id(5), Entry::new(Dims::from_slice(&[600]), DType::F32, 1));
    r.share(&id(4), Some(&id(3)), 7, 1200);
    // 5 expands 4: it joins the same buffer.
    r.share(&id(5), Some(&id(4)), 7, 1200);
    assert_eq!(check(&r).resident, 2400);
    // An offload in flight of one holder frees nothing when it lands.
    assert!(r.begin_offload(&id(3)));
    assert_eq!(check(&r).offloading, 0);
    assert!(r.complete_offload(&id(3), copy(1200)).is_ok());
    let books = check(&r);
    assert_eq!((books.resident, books.host), (2400, 1200));
    assert_eq!(r.get(&id(3)).unwrap().shared(), None, "off the device");
    with_recipe(&mut r, 4);
    with_recipe(&mut r, 5);
    assert!(r.evict(&id(4)));
    assert_eq!(check(&r).resident, 2400);
    assert!(r.evict(&id(5)));
    assert_eq!(check(&r).resident, 1200);
    // Back by fetch and recomputation: buffers of their own again.
    r.begin_fetch(&id(3));
    r.complete_fetch(&id(3));
    r.rematerialise(&id(4));
    assert_eq!(check(&r).resident, 1200 + 1200 + 1200);
}

#[test]
fn a_view_whose_source_is_gone_counts_its_whole_buffer() {
    let mut r = three();
    // A 10-element slice of a 1,000-element tensor that the op consumed.
    r.admit(id(4), Entry::new(Dims::from_slice(&[10]), DType::F32, 1));
    assert_eq!(r.share(&id(4), None, 9, 4000), 4000 - 40);
    assert_eq!(check(&r).resident, 2400 + 4000);
    r.remove(&id(4));
    assert_eq!(check(&r).resident, 2400);
}

#[test]
fn sharing_needs_both_tensors_resident() {
    let mut r = three();
    r.admit(id(4), Entry::new(Dims::from_slice(&[300]), DType::F32, 1));
    r.complete_offload(&id(3), copy(1200)).ok();
    assert_eq!(r.share(&id(4), Some(&id(3)), 7, 1200), 0);
    assert_eq!(r.share(&id(3), Some(&id(4)), 7, 1200), 0);
    assert_eq!(r.share(&id(4), Some(&id(4)), 7, 1200), 0);
    assert!(!r.any_shared());
    check(&r);
}

#[test]
fn peaks_restart_from_the_current_values() {
    let mut r = three();
    r.remove(&id(3));
    r.note_peak(5000);
    assert_eq!(check(&r).peak, 5000);
    r.reset_peaks();
    assert_eq!(check(&r).peak, 1200);
}

#[test]
fn holders_of_a_buffer_share_its_origin_while_any_is_in_the_books() {
    let mut r = three();
    assert!(!r.shares_origin(&id(1)), "nothing shared yet");
    // 2 views 1's buffer: both share the unwrapped run's buffer.
    r.share(&id(2), Some(&id(1)), 7, 400);
    assert!(r.shares_origin(&id(1)) && r.shares_origin(&id(2)));
    assert!(!r.shares_origin(&id(3)));
    // 1 leaves the device (it would come back apart): still shared in the unwrapped run.
    r.complete_offload(&id(1), copy(400)).ok();
    assert!(r.shares_origin(&id(2)));
    // A view made in 2's buffer by an op that consumed 2 (gone from the books before the
    // view is booked): it shares what 2 shared, as its entry says when it is admitted, and
    // no new buffer of the unwrapped run starts with it.
    let origin = r.origin_of(&id(2));
    r.remove(&id(2));
    let view = Entry::new(Dims::from_slice(&[200]), DType::F32, 1).in_origin(origin);
    r.admit_view(id(4), view, None, 9, 400);
    assert_eq!(r.origin_of(&id(4)), origin);
    assert!(r.shares_origin(&id(1)) && r.shares_origin(&id(4)));
    // An orphan (Burn let go of it while a recipe still needs it) holds nothing of the
    // unwrapped run.
    r.pin(&id(4));
    assert!(
        matches!(r.remove_unless_pinned(&id(4)), LetGo::Orphaned(None)),
        "pinned: it stays, as an orphan"
    );
    assert!(r.get(&id(4)).is_some_and(|e| e.orphan));
    assert!(!r.shares_origin(&id(1)));
    check(&r);
}

#[test]
fn a_parked_holder_leaves_the_device_and_comes_back_by_rematerialising() {
    let mut r = three();
    r.share(&id(2), Some(&id(1)), 7, 400);
    let before = check(&r).resident;
    assert!(r.park(&id(2)));
    assert!(!r.park(&id(2)), "already off the device");
    assert!(r.is_absent(&id(2)));
    // The buffer stays counted while 1 holds it.
    assert_eq!(check(&r).resident, before);
    r.complete_offload(&id(1), copy(400)).ok();
    assert_eq!(check(&r).resident, before - 400);
    assert!(r.rematerialise(&id(2)));
    assert_eq!(check(&r).resident, before - 400 + 800);
}

#[test]
fn an_entry_stays_small_enough_to_move_inline() {
    // Every op moves an entry into the table and one out of it; above 128 bytes each move
    // is a call to `memcpy` (measured: 184 bytes cost about 90 instructions per op).
    assert!(size_of::<Entry>() <= 128, "{} bytes", size_of::<Entry>());
}

#[test]
fn every_dtype_survives_packing() {
    use burn_backend::quantization::QuantScheme;
    for dtype in entry::PLAIN_DTYPES
        .into_iter()
        .chain([DType::QFloat(QuantScheme::default())])
    {
        let entry = Entry::new(Dims::from_slice(&[2, 3]), dtype, 0);
        assert_eq!(entry.dtype(), dtype);
    }
}
