//! `joiner crds`: prints the CustomResourceDefinitions of NodePool, NodeClaim and EC2NodeClass,
//! generated from the types in `joiner::api`, for `joiner crds | kubectl apply -f -`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Write one file per CRD (`<group>_<plural>.yaml`, as Karpenter names them) into this
    /// directory instead of printing the stream.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(args: CrdsArgs) -> anyhow::Result<ExitCode> {
    match args.out {
        None => super::output::write_stdout(&joiner::api::crds_yaml()?)?,
        Some(dir) => write_files(&dir)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn write_files(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for crd in joiner::api::crds() {
        let name = format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural);
        let path = dir.join(name);
        let text = format!("---\n{}", serde_yaml_ng::to_string(&crd)?);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
