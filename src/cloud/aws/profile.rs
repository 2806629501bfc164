//! Instance profiles for EC2NodeClasses that name a `role`: EC2 attaches an instance profile, not a
//! role, so (like Karpenter) joiner keeps one profile per cluster and node class holding that role.
//!
//! The profile's name is derived from the region, cluster and node class, so every replica and
//! every restart finds the same one: GetInstanceProfile first; when it is missing it is created
//! (under the path `/joiner/<region>/<cluster>/`, tagged for the cluster and node class); when it
//! holds another role (the class's role changed) that role is swapped for the class's.

use sha2::{Digest, Sha256};

use super::{cluster_tag_key, AwsClients, AwsError, NODECLASS_TAG};

/// IAM's limit on instance profile names.
const MAX_NAME: usize = 128;

/// The profile name for node class `nodeclass` of `cluster` in `region`:
/// `<cluster>_<16 hex digits of a SHA-256 of region, cluster and class>`, cut to IAM's limit.
pub fn profile_name(region: &str, cluster: &str, nodeclass: &str) -> String {
    let digest = Sha256::digest(format!("{region}/{cluster}/{nodeclass}").as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let keep = MAX_NAME - hex.len() - 1;
    // IAM names allow [\w+=,.@-]; anything else in a cluster name becomes '-'
    let prefix: String = cluster
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "+=,.@-_".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(keep)
        .collect();
    format!("{prefix}_{hex}")
}

/// The role's name from a name or an ARN (`arn:aws:iam::123:role/path/Name`).
pub fn role_name(role: &str) -> &str {
    role.rsplit('/').next().unwrap_or(role)
}

/// Makes sure the class's instance profile exists and holds `role`; returns its name.
pub async fn ensure(
    clients: &AwsClients,
    region: &str,
    cluster: &str,
    nodeclass: &str,
    role: &str,
) -> Result<String, AwsError> {
    let name = profile_name(region, cluster, nodeclass);
    let role = role_name(role);
    let held: Vec<String> = match clients
        .iam
        .get_instance_profile()
        .instance_profile_name(&name)
        .send()
        .await
    {
        Ok(out) => out
            .instance_profile()
            .map(|p| {
                p.roles()
                    .iter()
                    .map(|r| r.role_name().to_string())
                    .collect()
            })
            .unwrap_or_default(),
        Err(e) => {
            let e = AwsError::from_sdk("iam:GetInstanceProfile", e);
            if e.code() != Some("NoSuchEntity") {
                return Err(e);
            }
            create(clients, region, cluster, nodeclass, &name).await?;
            vec![]
        }
    };
    if held.iter().any(|r| r == role) {
        return Ok(name);
    }
    for old in held {
        clients
            .iam
            .remove_role_from_instance_profile()
            .instance_profile_name(&name)
            .role_name(&old)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("iam:RemoveRoleFromInstanceProfile", e))?;
    }
    clients
        .iam
        .add_role_to_instance_profile()
        .instance_profile_name(&name)
        .role_name(role)
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("iam:AddRoleToInstanceProfile", e))?;
    Ok(name)
}

async fn create(
    clients: &AwsClients,
    region: &str,
    cluster: &str,
    nodeclass: &str,
    name: &str,
) -> Result<(), AwsError> {
    let tag = |k: &str, v: &str| {
        aws_sdk_iam::types::Tag::builder()
            .key(k)
            .value(v)
            .build()
            .map_err(|e| AwsError::Response {
                call: "iam:CreateInstanceProfile",
                message: e.to_string(),
            })
    };
    let created = clients
        .iam
        .create_instance_profile()
        .instance_profile_name(name)
        .path(format!("/joiner/{region}/{cluster}/"))
        .tags(tag(&cluster_tag_key(cluster), "owned")?)
        .tags(tag(NODECLASS_TAG, nodeclass)?)
        .send()
        .await;
    match created {
        Ok(_) => Ok(()),
        Err(e) => {
            let e = AwsError::from_sdk("iam:CreateInstanceProfile", e);
            // another replica created it between our Get and Create
            if e.code() == Some("EntityAlreadyExists") {
                return Ok(());
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable_per_class_and_fit_iam() {
        let a = profile_name("us-east-1", "prod", "default");
        assert_eq!(a, profile_name("us-east-1", "prod", "default"));
        assert_ne!(a, profile_name("us-east-1", "prod", "gpu"));
        assert_ne!(a, profile_name("us-west-2", "prod", "default"));
        assert!(a.starts_with("prod_") && a.len() == "prod_".len() + 16);
        let long = profile_name("us-east-1", &"c".repeat(300), "default");
        assert_eq!(long.len(), MAX_NAME);
        assert!(profile_name("us-east-1", "my cluster", "x").starts_with("my-cluster_"));
    }

    #[test]
    fn a_role_arn_names_its_role() {
        assert_eq!(role_name("KarpenterNodeRole"), "KarpenterNodeRole");
        assert_eq!(
            role_name("arn:aws:iam::123456789012:role/nodes/KarpenterNodeRole"),
            "KarpenterNodeRole"
        );
    }
}
