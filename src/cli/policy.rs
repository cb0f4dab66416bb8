//! `gpuwl policy`: prints the ValidatingAdmissionPolicy that refuses a mistyped GPU
//! workload label at the API server ([`crate::policy`]).

use crate::policy::{self, Action};
use gpuwl_core::error::{Error, ExitStatus, Result};
use gpuwl_core::render;
use gpuwl_core::text;

/// Output format of `gpuwl policy`: manifests only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Two YAML documents: the policy, then its binding.
    Yaml,
    /// One `v1` `List` holding both.
    Json,
}

/// `gpuwl policy`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  gpuwl policy | kubectl apply -f -
  gpuwl policy --action Warn -o json > label-policy.json

Prints a ValidatingAdmissionPolicy and its ValidatingAdmissionPolicyBinding
(admissionregistration.k8s.io/v1, CEL, no webhook; Kubernetes >= 1.30) that refuse a Node
CREATE or UPDATE setting nvidia.com/gpu.workload.config to anything but container,
vm-passthrough or vm-vgpu (the message says which was meant: vm_passthrough → vm-passthrough),
or nvidia.com/vgpu.config to something that is not a vGPU type (A10-12Q, A100-4C,
A100-1-5C) nor default. Only a change is judged: an update that leaves the label as it was
passes, and node status updates are not matched. deploy/policy/ holds the default output;
the Helm chart renders it with labelPolicy.enabled=true.
Exit 0 printed · 2 bad input.")]
pub struct Args {
    /// Name of the policy and of its binding.
    #[arg(long, value_name = "NAME", default_value = policy::DEFAULT_NAME)]
    pub name: String,
    /// The binding's validationActions: Deny refuses; Warn lets through with a warning;
    /// Audit only records it in the audit log.
    #[arg(long, value_enum, default_value_t = Action::Deny)]
    pub action: Action,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Yaml)]
    pub output: Output,
}

/// Runs `gpuwl policy`.
///
/// Errors: [`Error::Input`] for a name the API server would refuse; a failed write.
pub fn run(a: &Args) -> Result<ExitStatus> {
    if !text::is_dns_subdomain(&a.name) {
        return Err(Error::Input(format!(
            "--name {}: not a valid object name (lower-case letters, digits, '-' and '.', \
             starting and ending with a letter or digit, at most 253)",
            render::esc(&text::cut(&a.name))
        )));
    }
    let text = match a.output {
        Output::Yaml => policy::yaml(&a.name, a.action),
        Output::Json => policy::json(&a.name, a.action),
    };
    render::write_stdout(text.as_bytes()).map_err(|e| Error::write("the policy", e))?;
    Ok(ExitStatus::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(text::is_dns_subdomain("gpuwl-workload-label"));
        assert!(text::is_dns_subdomain("a.b-1"));
        for bad in ["", "Gpuwl", "-a", "a-", "a_b", "a b", &"a".repeat(254)] {
            assert!(!text::is_dns_subdomain(bad), "{bad}");
        }
    }
}
