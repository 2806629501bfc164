//! Writes the final integer program of a solve as `.lp` and `.mps` through HiGHS itself, so HiGHS
//! standalone loads exactly the model joiner solved, plus a JSON summary a person can read: the pod
//! classes, variables and constraints by family, the chosen patterns and the bound.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::Path;

use highs::Sense;
use serde::Serialize;

use super::super::greedy;
use super::super::problem::Problem;
use super::super::state::State;
use super::columns::Bin;
use super::{build_lp, MipStatus, Model_, SolverError};

#[derive(Debug, Serialize)]
pub struct ClassSummary {
    pub id: usize,
    pub pods: usize,
    pub example: String,
    pub requests: BTreeMap<String, String>,
    pub compatible_offerings: usize,
    pub compatible_nodes: usize,
}

#[derive(Debug, Serialize)]
pub struct ModelSummary {
    pub pod_classes: Vec<ClassSummary>,
    pub variables: BTreeMap<String, usize>,
    pub constraints: BTreeMap<String, usize>,
    pub bins: usize,
    /// The integer program's optimum as HiGHS reported it (what the `.lp`/`.mps` files solve to).
    pub mip_objective: Option<f64>,
    /// How that integer solve ended; only `optimal` makes `mip_objective` the program's optimum.
    pub mip_status: MipStatus,
}

/// The master over the seed patterns (the optimizer's greedy start, each class alone on a node),
/// for every pending pod, with no column generation and no integer solve: the model written for a
/// solve that planned without its full model.
pub fn seed_model(p: &Problem) -> Model_ {
    let (greedy, _) = greedy::seed(p, State::new(p), &p.class_demands());
    let demand: Vec<u32> = p.classes.iter().map(|c| c.demand() as u32).collect();
    let super::Setup {
        bins,
        master,
        columns,
        ..
    } = super::setup(p, &greedy, &demand, super::bins(p), &[]);
    Model_ {
        bins,
        master,
        columns,
        mip_objective: None,
        mip_status: MipStatus::NotRun,
    }
}

pub fn summary(p: &Problem, m: &Model_) -> ModelSummary {
    let pod_classes = p
        .classes
        .iter()
        .enumerate()
        .map(|(id, c)| ClassSummary {
            id,
            pods: c.demand(),
            example: c.pods[0].clone(),
            requests: c
                .constraints
                .requests
                .iter()
                .map(|(k, q)| (k.to_string(), q.to_canonical()))
                .collect(),
            compatible_offerings: c.offerings.len(),
            compatible_nodes: c.existing.len(),
        })
        .collect();
    let mut variables: BTreeMap<String, usize> = BTreeMap::new();
    for a in &m.master.aux {
        *variables.entry(a.kind.family().to_string()).or_default() += 1;
    }
    for c in &m.columns {
        let fam = match c.bin {
            Bin::New { .. } => "new_node_pattern",
            Bin::Existing(_) => "existing_node_pattern",
        };
        *variables.entry(fam.to_string()).or_default() += 1;
    }
    let mut constraints: BTreeMap<String, usize> = BTreeMap::new();
    for r in &m.master.rows {
        *constraints.entry(r.kind.family().to_string()).or_default() += 1;
    }
    ModelSummary {
        pod_classes,
        variables,
        constraints,
        bins: m.bins.len(),
        mip_objective: m.mip_objective,
        mip_status: m.mip_status,
    }
}

/// Writes `<base>.lp` and `<base>.mps`.
pub fn write_model(p: &Problem, m: &Model_, base: &Path) -> Result<(), SolverError> {
    let index: BTreeMap<Bin, usize> = m.bins.iter().enumerate().map(|(i, b)| (b.bin, i)).collect();
    let mip = build_lp(p, &m.master, &m.bins, &index, &m.columns, true);
    let mut model = mip.optimise(Sense::Minimise);
    model.make_quiet();
    for ext in ["lp", "mps"] {
        let path = base.with_extension(ext);
        let c = CString::new(path.display().to_string())?;
        // SAFETY: the pointer comes from a live HiGHS model and the path is a valid C string
        let status = unsafe { highs_sys::Highs_writeModel(model.as_mut_ptr(), c.as_ptr()) };
        if status == highs_sys::STATUS_ERROR {
            return Err(SolverError::Write { path });
        }
    }
    Ok(())
}
