use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex};
use burn_swap_suite::models::{Mlp, MlpConfig};
use burn_swap_suite::train::{init_mlp, train_loop};
type B = Autodiff<burn_swap::Swap<Flex>>;
fn main() {
    let config = MlpConfig {
        d_in: 256,
        hidden: 1024,
        depth: 4,
        d_out: 16,
        batch: 256,
        seed: 17,
    };
    let device = FlexDevice;
    let model = init_mlp::<B>(&config, &device, 42);
    let (model, _) = train_loop(
        model,
        2,
        1e-3,
        |m: &Mlp<B>, s| m.loss(&config, s, &device),
        |_, _| {},
    );
    let peak = burn_swap::memory(&device).unwrap().peak_bytes;
    burn_swap::configure(&device, burn_swap::SwapConfig::budget_bytes(peak / 4)).unwrap();
    let mut marks = vec![];
    burn_swap::restart_trace(&device);
    let (_m, _) = train_loop(
        model,
        4,
        1e-3,
        |m: &Mlp<B>, s| m.loss(&config, s + 1, &device),
        |_, _| {
            marks.push(burn_swap::trace_window(&device).unwrap().ops.len());
        },
    );
    let t = burn_swap::trace_window(&device).unwrap();
    println!("marks {marks:?}");
    let desc = |o: &burn_swap::trace::OpTrace| {
        format!(
            "{} {:?}",
            o.kind,
            o.inputs
                .iter()
                .map(|id| t.tensor(*id).map(|x| x.shape.clone()))
                .collect::<Vec<_>>()
        )
    };
    let mut prev: Option<Vec<String>> = None;
    let mut bounds = vec![0];
    bounds.extend(&marks);
    for w in bounds.windows(2) {
        let all: Vec<String> = t.ops[w[0]..w[1]].iter().map(desc).collect();
        if let Some(p) = &prev {
            println!("len {} equal {}", all.len(), *p == all);
            for (i, (a, b)) in p.iter().zip(&all).enumerate() {
                if a != b {
                    println!("  first diff at {i}: {a} | {b}");
                    break;
                }
            }
        } else {
            println!("len {}", all.len());
        }
        prev = Some(all);
    }
    let sigs: Vec<u64> = t.ops.iter().map(|o| o.signature).collect();
    println!("detect {:?}", burn_swap::trace::period::detect(&sigs));
    for p in [172usize] {
        let n = sigs.len();
        let mut run = 0;
        while run + p < n && sigs[n - 1 - run] == sigs[n - 1 - run - p] {
            run += 1;
        }
        println!("run at {p}: {run}");
        let i = n - 1 - run;
        println!(
            "mismatch at {} : {} {:?} vs {} {:?}",
            i,
            t.ops[i].kind,
            t.ops[i].signature,
            t.ops[i - p].kind,
            t.ops[i - p].signature
        );
    }
    let m = burn_swap::memory(&device).unwrap();
    println!("budget {} peak {}", peak / 4, m.peak_bytes);
}
