use burn_backend::TensorData;
use burn_std::AllocationProperty;

/// A lent copy and the kept one read the same bytes without a copy, keep the allocation
/// property, and the kept one outlives the lent one (as when the backend's write drops
/// what it took and fails).
#[test]
fn a_lent_copy_leaves_the_kept_one_whole() {
    let data = TensorData::new(vec![1.5f32, -0.0, 3.25, 7.0], [2, 2]);
    let expected = data.clone();
    let property = data.bytes.property();
    let (lent, kept) = super::copy_back::lend(data);
    assert_eq!(lent.bytes.as_ptr(), kept.bytes.as_ptr(), "no copy");
    assert_eq!(lent.bytes.property(), property);
    assert_eq!(kept.bytes.property(), property);
    assert_ne!(property, AllocationProperty::Pinned);
    drop(lent);
    assert_eq!(kept, expected);
    // Lent again (a retry), it is still the same bytes.
    let (again, kept) = super::copy_back::lend(kept);
    drop(kept);
    assert_eq!(again, expected);
}

/// On Flex a device copy that nothing else holds goes to the host pool when its offload
/// completes, and the next copy of its length is made into it: the same bytes as Flex's
/// own read, in the same buffer. A device copy something else still holds is left alone.
#[test]
fn a_freed_device_copy_takes_the_next_host_copy_of_its_length() {
    use super::HostPool;
    use super::copy_out::read;
    use super::host_resident::recycle;
    use burn::backend::Flex;
    use burn_backend::ops::FloatTensorOps;
    use burn_ir::HandleKind;
    let device = Default::default();
    let tensor = |values: Vec<f32>| {
        let data = TensorData::new(values, [2, 2]);
        HandleKind::<Flex>::Float(Flex::float_from_data(data, &device))
    };
    let (shape, dtype) = (burn_std::Shape::new([2, 2]), burn_std::DType::F32);
    let pool = HostPool::default();

    // Held elsewhere too (a view, a clone): not taken, and intact.
    let shared = tensor(vec![1.0, 2.0, 3.0, 4.0]);
    let other = shared.clone();
    recycle::<Flex>(shared, shape.clone(), dtype, &pool, (0, 1 << 20));
    assert_eq!(pool.idle_bytes(), 0);
    let data = read::<Flex>(other, shape.clone(), dtype, None).unwrap();
    assert_eq!(data.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);

    // Held by nothing else: taken whole, then filled by the next copy of 16 bytes.
    let freed = tensor(vec![0.0; 4]);
    let address = match &freed {
        HandleKind::Float(t) => t.bytes().as_ptr(),
        _ => unreachable!(),
    };
    recycle::<Flex>(freed, shape.clone(), dtype, &pool, (0, 1 << 20));
    assert_eq!(pool.idle_bytes(), 16);
    let source = tensor(vec![-1.5, 0.0, 2.25, 8.0]);
    let copy = read::<Flex>(source.clone(), shape.clone(), dtype, Some(&pool)).unwrap();
    assert_eq!(copy.bytes.as_ptr(), address, "made in the recycled buffer");
    assert_eq!(pool.idle_bytes(), 0);
    let own = read::<Flex>(source, shape, dtype, None).unwrap();
    assert_eq!(copy, own, "the same bytes as Flex's own read");
    // Adopted back as a tensor, it is Flex's own buffer: written in place, not copied.
    let added = Flex::float_add_scalar(Flex::float_from_data(copy, &device), 1.0f32.into());
    assert_eq!(added.bytes().as_ptr(), address, "written in place");
}

/// A panic that escapes a job is that job's failure, reported; the worker goes on with
/// the next job (a dead worker would leave the engine waiting for it forever).
#[test]
fn a_worker_survives_a_panic_that_escapes_its_job() {
    use super::{Done, FetchJob, HostCopy};
    use burn::backend::Flex;
    use burn::backend::flex::FlexDevice;
    let (jobs, queue) = std::sync::mpsc::channel::<FetchJob<Flex>>();
    let (done, reports) = std::sync::mpsc::channel::<Done<Flex>>();
    let worker = super::spawn_worker("test-worker", queue, done, |job: FetchJob<Flex>| {
        if job.id.value() == 1 {
            panic!("injected escape");
        }
        Some(<FetchJob<Flex> as super::Job<Flex>>::lost(
            job.id,
            super::TransferError::Injected("test"),
        ))
    })
    .unwrap();
    for id in [1, 2] {
        let data = TensorData::new(vec![1.0f32; 4], [4]);
        jobs.send(FetchJob {
            id: burn_ir::TensorId::new(id),
            copy: HostCopy::Raw(data),
            device: FlexDevice,
            sync: false,
            queued: std::time::Instant::now(),
        })
        .unwrap();
    }
    drop(jobs);
    let first = reports.recv().unwrap();
    assert!(
        matches!(&first, Done::Fetched { id, result: Err(super::TransferError::Panicked(m)), .. }
            if id.value() == 1 && m == "injected escape"),
        "the escaped panic is the job's failure"
    );
    assert_eq!(
        reports.recv().unwrap().id().value(),
        2,
        "the worker went on"
    );
    worker.join().unwrap();
}

#[test]
fn flex_adopts_the_bytes_it_is_given() {
    assert!(super::host_resident::adopts_bytes::<burn::backend::Flex>());
}
