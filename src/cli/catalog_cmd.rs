//! `joiner catalog build`: writes a catalog file from the offline AWS reference data.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Build a catalog JSON for one region from the AWS reference data folder.
    Build {
        /// Folder with instance-types.json, offerings-REGION.json, prices-REGION.json, spot-advisor.json.
        #[arg(long, env = "JOINER_AWS_DATA", default_value = "../shared/data/aws")]
        data: PathBuf,
        #[arg(long, default_value = "us-east-1")]
        region: String,
        /// Where to write the catalog.
        #[arg(long)]
        out: PathBuf,
    },
}

pub fn run(cmd: CatalogCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        CatalogCommand::Build { data, region, out } => {
            let (catalog, report) = joiner::catalog::build::build_catalog(&data, &region)?;
            let text = joiner::catalog::build::to_pretty_json(&catalog)?;
            std::fs::write(&out, text)?;
            eprintln!("{report}");
            Ok(ExitCode::SUCCESS)
        }
    }
}
