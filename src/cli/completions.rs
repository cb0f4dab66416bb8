//! `gpuwl completions SHELL`: clap's completion script for subcommands and flags, plus, for
//! bash and zsh, pod names after `explain` taken from the live cluster through the hidden
//! `gpuwl __complete-pods` (quietly nothing when no cluster answers within 3 s).

use clap::CommandFactory;

use crate::error::{Error, ExitStatus, Result};

/// Arguments of the hidden `gpuwl __complete-pods`, called by the completion scripts.
#[derive(Debug, clap::Args)]
pub struct PodsArgs {
    /// Namespace (default: the kubeconfig context's namespace).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Where the live cluster is.
    #[command(flatten)]
    pub live: crate::input::live::ClusterArgs,
}

/// The flags of `explain` that take a value: the word after them is not a pod name.
const VALUE_FLAGS: &str = "-n|--namespace|--pod|--nodes|--pods|--kubevirt|--cluster-policy|--kubeconfig|--context|-o|--output|--request-timeout";

/// Bash: a wrapper around clap's `_gpuwl` that offers pod names for `explain`'s target.
fn bash_pods() -> String {
    format!(
        r#"
# Pod names for `gpuwl explain` (the live cluster, the namespace of -n or the context).
_gpuwl_with_pods() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" i explain=0
    local extra=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            explain) explain=1 ;;
            -n|--namespace|--kubeconfig|--context) extra+=("${{COMP_WORDS[i]}}" "${{COMP_WORDS[i+1]}}") ;;
        esac
    done
    if [[ $explain == 1 && "$cur" != -* ]]; then
        case "$prev" in
            {VALUE_FLAGS}) ;;
            *)
                COMPREPLY=($(compgen -W "$(gpuwl __complete-pods "${{extra[@]}}" 2>/dev/null)" -- "$cur"))
                if [[ ${{#COMPREPLY[@]}} -gt 0 ]]; then return 0; fi ;;
        esac
    fi
    _gpuwl "$@"
}}
complete -F _gpuwl_with_pods -o bashdefault -o default gpuwl
"#
    )
}

/// Zsh: a function that offers pod names, used as the action of `explain`'s target.
const ZSH_PODS: &str = r#"
# Pod names for `gpuwl explain` (the live cluster, the namespace of -n or the context).
(( $+functions[_gpuwl_pods] )) ||
_gpuwl_pods() {
    local -a extra pods
    local i
    for (( i = 2; i < CURRENT; i++ )); do
        case "${words[i]}" in
            -n|--namespace|--kubeconfig|--context) extra+=("${words[i]}" "${words[i+1]}") ;;
        esac
    done
    pods=(${(f)"$(gpuwl __complete-pods "${extra[@]}" 2>/dev/null)"})
    _describe -t pods 'pod' pods
}
"#;

/// The completion script for `shell`.
///
/// Errors: none today; the `Result` covers a generator that cannot find what it patches
/// (the zsh target action), reported as a runtime failure.
pub fn script(shell: clap_complete::Shell) -> Result<Vec<u8>> {
    let mut cmd = crate::cli::Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "gpuwl", &mut out);
    match shell {
        clap_complete::Shell::Bash => out.extend_from_slice(bash_pods().as_bytes()),
        clap_complete::Shell::Zsh => {
            let text = String::from_utf8_lossy(&out).into_owned();
            // clap gives the explain target `_default` (file names); pods fit better.
            let marker = "::target -- ";
            let Some(at) = text.find(marker) else {
                return Err(Error::Runtime(
                    "zsh completion: explain's target not found in clap's script".into(),
                ));
            };
            let end = at
                + text[at..]
                    .find(":_default'")
                    .ok_or_else(|| Error::Runtime("zsh completion: no _default action".into()))?;
            let patched = format!(
                "{}:_gpuwl_pods'{}",
                &text[..end],
                &text[end + ":_default'".len()..]
            );
            out = format!("{ZSH_PODS}{patched}").into_bytes();
        }
        _ => {}
    }
    Ok(out)
}

/// Writes the completion script for `shell` to stdout.
///
/// Errors: [`Error::Write`] when stdout fails.
pub fn run(shell: clap_complete::Shell) -> Result<ExitStatus> {
    let s = script(shell)?;
    crate::render::write_stdout(&s)
        .map(|_| ExitStatus::Ok)
        .map_err(|e| Error::write("the completion script", e))
}

/// Runs the hidden `gpuwl __complete-pods`: pod names, one per line, in the namespace of
/// `-n` or the context's. Waits at most 3 s per request; any failure prints nothing and
/// exits 0, so a completion never shows an error.
pub fn run_pods(args: &PodsArgs) -> Result<ExitStatus> {
    let mut live = args.live.clone();
    live.request_timeout = live.request_timeout.min(3);
    let names = live.block_on(|client| async move {
        let ns = args
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned());
        let api: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, &ns);
        let list = api
            .list_metadata(&kube::api::ListParams::default().limit(500))
            .await
            .map_err(|e| crate::input::live::api_error("list pods", &e))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect::<Vec<_>>())
    });
    let mut out = String::new();
    for n in names.unwrap_or_default() {
        // Names are DNS labels; anything else is not offered.
        if n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        {
            out.push_str(&n);
            out.push('\n');
        }
    }
    let _ = crate::render::write_stdout(out.as_bytes());
    Ok(ExitStatus::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_script_wraps_clap_and_offers_pods_after_explain() {
        let s = String::from_utf8(script(clap_complete::Shell::Bash).unwrap()).unwrap();
        assert!(s.contains("_gpuwl() {"), "clap's function is kept");
        assert!(s.contains("complete -F _gpuwl_with_pods"));
        assert!(s.contains("gpuwl __complete-pods"));
    }

    #[test]
    fn zsh_script_uses_pod_names_for_the_explain_target() {
        let s = String::from_utf8(script(clap_complete::Shell::Zsh).unwrap()).unwrap();
        let target = s
            .lines()
            .find(|l| l.contains("::target -- "))
            .expect("explain's target");
        assert!(target.trim_end().ends_with(":_gpuwl_pods' \\"), "{target}");
        assert!(s.contains("_gpuwl_pods() {"));
    }
}
