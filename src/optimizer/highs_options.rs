//! Every HiGHS option joiner sets, named in this one module. A solve states what it wants as a
//! [`SolverOptions`] value and [`SolverOptions::apply`] sets it on the model; an option left `None`
//! keeps HiGHS's default. Option names and meanings:
//! <https://ergo-code.github.io/HiGHS/dev/options/definitions/>.

use highs::Model;

/// Which simplex variant HiGHS runs on an LP (its `simplex_strategy` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Simplex {
    /// The dual simplex (`simplex_strategy` 1): restarts from a basis that stays dual feasible.
    Dual,
    /// The primal simplex (`simplex_strategy` 4): restarts from a basis that stays primal feasible.
    Primal,
}

impl Simplex {
    fn code(self) -> i32 {
        match self {
            Simplex::Dual => 1,
            Simplex::Primal => 4,
        }
    }
}

/// The HiGHS options of one model.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SolverOptions {
    /// No output on the console or in log files.
    pub quiet: bool,
    /// `threads`: HiGHS's worker threads.
    pub threads: Option<i32>,
    /// `random_seed`: fixed, so that a solve is repeatable.
    pub random_seed: Option<i32>,
    /// `time_limit`, seconds. HiGHS's clock runs across the solves of one model.
    pub time_limit: Option<f64>,
    /// `mip_rel_gap`: the relative gap at which the integer solve stops.
    pub mip_rel_gap: Option<f64>,
    /// `mip_abs_gap`: the absolute gap at which the integer solve stops.
    pub mip_abs_gap: Option<f64>,
    /// `mip_max_nodes`: branch-and-bound nodes after which the integer solve stops.
    pub mip_max_nodes: Option<i32>,
    /// `presolve`: `Some(false)` turns it off (a warm-started LP keeps its basis).
    pub presolve: Option<bool>,
    /// `simplex_strategy`.
    pub simplex: Option<Simplex>,
    /// `mip_heuristic_run_feasibility_jump`: the primal heuristic that looks for a first feasible
    /// point.
    pub feasibility_jump: Option<bool>,
}

impl SolverOptions {
    /// A re-solve of an LP that keeps its basis: presolve off (it would throw the basis away), and
    /// the simplex variant for which that basis stays feasible.
    pub fn warm_lp(simplex: Simplex) -> Self {
        SolverOptions {
            presolve: Some(false),
            simplex: Some(simplex),
            ..SolverOptions::default()
        }
    }

    /// Sets every option given on `model`.
    pub fn apply(&self, model: &mut Model) {
        if self.quiet {
            model.make_quiet();
        }
        if let Some(n) = self.threads {
            model.set_option("threads", n);
        }
        if let Some(seed) = self.random_seed {
            model.set_option("random_seed", seed);
        }
        if let Some(seconds) = self.time_limit {
            model.set_option("time_limit", seconds);
        }
        if let Some(gap) = self.mip_rel_gap {
            model.set_option("mip_rel_gap", gap);
        }
        if let Some(gap) = self.mip_abs_gap {
            model.set_option("mip_abs_gap", gap);
        }
        if let Some(n) = self.mip_max_nodes {
            model.set_option("mip_max_nodes", n);
        }
        if let Some(on) = self.presolve {
            model.set_option("presolve", if on { "on" } else { "off" });
        }
        if let Some(s) = self.simplex {
            model.set_option("simplex_strategy", s.code());
        }
        if let Some(on) = self.feasibility_jump {
            model.set_option("mip_heuristic_run_feasibility_jump", on);
        }
    }
}

/// Whether HiGHS holds a feasible point for `solved`. HiGHS reports the status -1 when its info is
/// not valid (a run it stopped early, an internal error), which the binding's
/// `primal_solution_status` turns into a panic; here it reads as no point.
pub fn has_feasible_point(solved: &highs::SolvedModel) -> bool {
    solved
        .int_info_value(c"primal_solution_status")
        .is_ok_and(|v| v == highs::HighsSolutionStatus::Feasible as i64)
}
