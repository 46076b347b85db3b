//! When a strided view keeps the op that made it (to leave later by recomputation), and when
//! it gets its recipe at once.
//!
//! A tensor whose layout may be strided cannot be offloaded bit for bit (a fetch writes it
//! back contiguous, and some kernels sum in stride order), so under a budget it leaves by
//! recomputation: its op, replayed, makes the same view again. A pure function of what the
//! executor knows of the op; it never touches a device.

/// What the executor knows of an op whose single output may be strided.
pub struct ViewFacts<'a> {
    /// A budget is in force (without one nothing ever leaves).
    pub budgeted: bool,
    /// The op makes one output.
    pub single_output: bool,
    /// Replaying the op makes the same values (not random, not `Init`, not custom).
    pub replayable: bool,
    /// The op reads one of its inputs for the last time.
    pub consumes_input: bool,
    /// Whether every input could itself leave the device (asked only when it matters).
    pub inputs_can_leave: &'a dyn Fn() -> bool,
}

/// What a strided output keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewKeep {
    /// Nothing: it stays until Burn lets go of it.
    Nothing,
    /// The op, to become its recipe later (when Burn lets go of an input, or room is
    /// needed), so that its inputs are not pinned before that.
    KeepOp,
    /// Its recipe now: the op consumes an input, which would be gone later; that input is
    /// pinned from now on, which is worth it only when it can leave itself.
    RecipeNow,
}

/// What a strided output of an op keeps, under the facts.
pub fn keep(facts: &ViewFacts<'_>) -> ViewKeep {
    if !(facts.budgeted && facts.single_output && facts.replayable) {
        ViewKeep::Nothing
    } else if facts.consumes_input && (facts.inputs_can_leave)() {
        ViewKeep::RecipeNow
    } else {
        ViewKeep::KeepOp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(consumes_input: bool, can_leave: &dyn Fn() -> bool) -> ViewFacts<'_> {
        ViewFacts {
            budgeted: true,
            single_output: true,
            replayable: true,
            consumes_input,
            inputs_can_leave: can_leave,
        }
    }

    #[test]
    fn a_view_that_consumes_its_input_gets_its_recipe_at_once_if_the_input_can_leave() {
        assert_eq!(keep(&facts(true, &|| true)), ViewKeep::RecipeNow);
        assert_eq!(keep(&facts(true, &|| false)), ViewKeep::KeepOp);
        assert_eq!(
            keep(&facts(false, &|| panic!("not asked"))),
            ViewKeep::KeepOp
        );
    }

    #[test]
    fn nothing_is_kept_without_a_budget_or_for_ops_that_cannot_be_replayed() {
        let no = |f: ViewFacts<'_>| keep(&f);
        let always = || true;
        assert_eq!(
            no(ViewFacts {
                budgeted: false,
                ..facts(true, &always)
            }),
            ViewKeep::Nothing
        );
        assert_eq!(
            no(ViewFacts {
                replayable: false,
                ..facts(true, &always)
            }),
            ViewKeep::Nothing
        );
        assert_eq!(
            no(ViewFacts {
                single_output: false,
                ..facts(true, &always)
            }),
            ViewKeep::Nothing
        );
    }
}
