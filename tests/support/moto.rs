//! A real EC2/SSM/SQS emulator for the AWS provider's tests: `moto_server` (PyPI `moto[server]`,
//! installed into `.venv` by scripts/setup.sh) started on a loopback port it picks itself, one per test, and
//! killed on drop. `$JOINER_MOTO` names the executable (scripts/test.sh sets it); a missing one fails
//! the test rather than skipping it. See ../shared/notes/moto-ec2.md for what moto does not emulate.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use joiner::cloud::aws::{AwsClients, AwsSettings};

pub struct Moto {
    child: Child,
    pub endpoint: String,
    pub port: u16,
}

fn executable() -> PathBuf {
    if let Ok(p) = std::env::var("JOINER_MOTO") {
        return PathBuf::from(p);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/moto_server")
}

/// The port moto announces on stderr ("Running on http://127.0.0.1:PORT"), sent once; stderr is
/// drained until moto exits, so that its request log never fills the pipe.
fn announced_port(stderr: std::process::ChildStderr) -> std::sync::mpsc::Receiver<u16> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(port) = line
                .split_once("Running on http://127.0.0.1:")
                .and_then(|(_, rest)| rest.trim().parse::<u16>().ok())
            {
                let _ = tx.send(port);
            }
        }
    });
    rx
}

impl Moto {
    /// Starts moto with instance-type validation on (so an unknown type fails like EC2's does) and
    /// waits until it answers. moto binds port 0 itself and the port is read from its "Running on"
    /// line: a port picked here and bound by the child later could be taken in between, and once a
    /// second test's moto found the first one's port taken, the readiness check reached the first
    /// one, and its first request was refused when that test ended (CI on 5df3d72).
    pub fn start() -> Moto {
        let exe = executable();
        for _ in 0..3 {
            let mut child = Command::new(&exe)
                .args(["-H", "127.0.0.1", "-p", "0"])
                .env("MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION", "true")
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!(
                        "cannot start {} ({e}); run scripts/setup.sh or set JOINER_MOTO",
                        exe.display()
                    )
                });
            let port = announced_port(child.stderr.take().expect("piped stderr"));
            let Ok(port) = port.recv_timeout(Duration::from_secs(60)) else {
                let _ = child.kill();
                let _ = child.wait();
                continue;
            };
            let mut moto = Moto {
                child,
                endpoint: format!("http://127.0.0.1:{port}"),
                port,
            };
            if moto.wait_ready(Duration::from_secs(60)) {
                return moto;
            }
        }
        panic!("moto_server did not start in three tries");
    }

    fn wait_ready(&mut self, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// An SDK configuration for `endpoint` (moto, or a fault proxy in front of it) with static
    /// test credentials and quick retries.
    pub fn sdk_config(endpoint: &str, region: &str) -> SdkConfig {
        let creds = aws_sdk_ec2::config::Credentials::new("testing", "testing", None, None, "moto");
        SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(region.to_string()))
            .endpoint_url(endpoint)
            .credentials_provider(
                aws_credential_types::provider::SharedCredentialsProvider::new(creds),
            )
            .http_client(aws_smithy_http_client::Builder::new().build_http())
            .retry_config(
                aws_config::retry::RetryConfig::standard()
                    .with_max_attempts(4)
                    .with_initial_backoff(Duration::from_millis(20)),
            )
            .sleep_impl(aws_smithy_async::rt::sleep::default_async_sleep().expect("tokio sleep"))
            .time_source(aws_smithy_async::time::SystemTimeSource::new())
            .build()
    }

    pub fn settings(&self, region: &str, cluster: &str) -> AwsSettings {
        let mut s = AwsSettings::new(region, cluster, "https://kube.test:6443");
        s.endpoint_url = Some(self.endpoint.clone());
        s
    }

    pub fn clients(&self, region: &str, cluster: &str) -> AwsClients {
        AwsClients::from_config(
            &Moto::sdk_config(&self.endpoint, region),
            &self.settings(region, cluster),
        )
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the test account holds: two tagged subnets (1a, 1b), one untagged (1a), a tagged security
/// group, and an x86_64 and an arm64 image (from moto's built-in AMIs), the x86 one behind an SSM
/// parameter as well.
pub struct Account {
    pub subnet_a: String,
    pub subnet_b: String,
    pub group: String,
    pub ami_x86: String,
    pub ami_arm: String,
}

fn tagged(kind: ResourceType, k: &str, v: &str) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .tags(Tag::builder().key(k).value(v).build())
        .build()
}

impl Account {
    /// Creates the account's network and images; subnets and the group carry
    /// `karpenter.sh/discovery: <discovery>`.
    pub async fn create(c: &AwsClients, discovery: &str) -> Account {
        let vpc = c
            .ec2
            .create_vpc()
            .cidr_block("10.0.0.0/16")
            .send()
            .await
            .expect("vpc")
            .vpc
            .and_then(|v| v.vpc_id)
            .expect("vpc id");
        let subnet = |cidr: &'static str, zone: &'static str, tag: bool| {
            let mut call = c
                .ec2
                .create_subnet()
                .vpc_id(&vpc)
                .cidr_block(cidr)
                .availability_zone(zone);
            if tag {
                call = call.tag_specifications(tagged(
                    ResourceType::Subnet,
                    "karpenter.sh/discovery",
                    discovery,
                ));
            }
            async move {
                call.send()
                    .await
                    .expect("subnet")
                    .subnet
                    .and_then(|s| s.subnet_id)
                    .expect("subnet id")
            }
        };
        let subnet_a = subnet("10.0.1.0/24", "us-east-1a", true).await;
        let subnet_b = subnet("10.0.2.0/24", "us-east-1b", true).await;
        subnet("10.0.3.0/24", "us-east-1a", false).await;
        let group = c
            .ec2
            .create_security_group()
            .group_name("nodes")
            .description("nodes")
            .vpc_id(&vpc)
            .tag_specifications(tagged(
                ResourceType::SecurityGroup,
                "karpenter.sh/discovery",
                discovery,
            ))
            .send()
            .await
            .expect("security group")
            .group_id
            .expect("group id");
        let images = c
            .ec2
            .describe_images()
            .send()
            .await
            .expect("images")
            .images
            .unwrap_or_default();
        let image = |arch: &str| {
            images
                .iter()
                .find(|i| {
                    i.architecture().map(|a| a.as_str()) == Some(arch) && i.image_id().is_some()
                })
                .and_then(|i| i.image_id())
                .expect("moto has an image of the arch")
                .to_string()
        };
        let (ami_x86, ami_arm) = (image("x86_64"), image("arm64"));
        c.ssm
            .put_parameter()
            .name("/joiner/test/ami")
            .value(&ami_x86)
            .r#type(aws_sdk_ssm::types::ParameterType::String)
            .send()
            .await
            .expect("ssm parameter");
        Account {
            subnet_a,
            subnet_b,
            group,
            ami_x86,
            ami_arm,
        }
    }
}

/// The user data EC2 holds for instance `id`, decoded from base64.
pub async fn user_data(ec2: &aws_sdk_ec2::Client, id: &str) -> String {
    use base64::Engine;
    let attr = ec2
        .describe_instance_attribute()
        .instance_id(id)
        .attribute(aws_sdk_ec2::types::InstanceAttributeName::UserData)
        .send()
        .await
        .expect("user data");
    let data = attr
        .user_data()
        .and_then(|u| u.value())
        .expect("user data set");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .expect("base64");
    String::from_utf8(bytes).expect("utf-8")
}
