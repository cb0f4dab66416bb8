//! `gpuwl completions SHELL`: clap's completion script for subcommands and flags, plus, for
//! bash and zsh, names from the live cluster through the hidden `gpuwl __complete`: pods
//! after `explain`, nodes after `relabel` and `whatif relabel` (quietly nothing when no
//! cluster answers within 3 s).

use clap::CommandFactory;

use crate::cli::Cli;
use crate::input::live::{self, ClusterArgs};
use gpuwl_core::error::{Error, ExitStatus, Result};
use gpuwl_core::model::workload::WorkloadConfig;
use gpuwl_core::render;

/// Arguments of the hidden `gpuwl __complete-pods` (pod names, one per line), which the zsh
/// scripts of earlier versions call; today's scripts ask `gpuwl __complete`.
#[derive(Debug, clap::Args)]
pub struct PodsArgs {
    /// Namespace (default: the kubeconfig context's namespace).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Where the live cluster is.
    #[command(flatten)]
    pub live: ClusterArgs,
}

/// The flags of `explain` that take a value, as a bash `case` pattern (`-n|--namespace|…`):
/// the word after them is not a pod name. Read from explain's clap definition, so a flag
/// added there is never offered pod names after it.
fn explain_value_flags() -> String {
    let cmd = Cli::command();
    let Some(explain) = cmd.find_subcommand("explain") else {
        return "-n|--namespace".into();
    };
    let mut flags = Vec::new();
    for arg in explain.get_arguments() {
        if arg.is_positional() || !arg.get_action().takes_values() {
            continue;
        }
        if let Some(c) = arg.get_short() {
            flags.push(format!("-{c}"));
        }
        if let Some(l) = arg.get_long() {
            flags.push(format!("--{l}"));
        }
    }
    flags.join("|")
}

/// Bash: a wrapper around clap's `_gpuwl` that asks `gpuwl __complete` ([`candidates`])
/// for `explain`'s target (pod names, `NS/NAME` after a `/`) and for `relabel`'s and
/// `whatif relabel`'s `NODE=CONFIG` (node names, then workload configs; bash splits the
/// word at `=`, so the node is joined back before asking and left out of the answer).
fn bash_pods() -> String {
    let value_flags = explain_value_flags();
    format!(
        r#"
# Live names for `gpuwl explain` (pods) and `gpuwl relabel` (nodes), from `gpuwl __complete`.
_gpuwl_with_pods() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" i explain=0 relabel=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            explain) explain=1 ;;
            relabel) relabel=1 ;;
        esac
    done
    if [[ $relabel == 1 && "$cur" != -* ]]; then
        local node="" word="$cur" before=$((COMP_CWORD - 1))
        if [[ "$cur" == "=" ]]; then
            node="$prev"; word="$prev="; cur=""; before=$((COMP_CWORD - 2))
        elif [[ "$prev" == "=" ]]; then
            node="${{COMP_WORDS[COMP_CWORD-2]}}"; word="$node=$cur"; before=$((COMP_CWORD - 3))
        fi
        local w items=()
        while IFS= read -r w; do
            [[ -z "$w" || "$w" == :* ]] && continue
            [[ -n "$node" ]] && w="${{w#"$node="}}"
            [[ "$w" == "$cur"* ]] && items+=("$w")
        done < <(gpuwl __complete "${{COMP_WORDS[@]:1:before}}" "$word" 2>/dev/null)
        if [[ ${{#items[@]}} -gt 0 ]]; then
            COMPREPLY=("${{items[@]}}")
            [[ -z "$node" ]] && compopt -o nospace 2>/dev/null
            return 0
        fi
    fi
    if [[ $explain == 1 && "$cur" != -* ]]; then
        case "$prev" in
            {value_flags}) ;;
            *)
                COMPREPLY=($(gpuwl __complete "${{COMP_WORDS[@]:1:COMP_CWORD}}" 2>/dev/null | grep -v '^:'))
                if [[ ${{#COMPREPLY[@]}} -gt 0 ]]; then return 0; fi ;;
        esac
    fi
    _gpuwl "$@"
}}
complete -F _gpuwl_with_pods -o bashdefault -o default gpuwl
"#
    )
}

/// Zsh: a function that asks `gpuwl __complete` ([`candidates`]) with the words typed so
/// far (read from the line itself: `_arguments` narrows `words` to the current
/// subcommand's), used as the action of `explain`'s target and name and of `relabel`'s and
/// `whatif relabel`'s `NODE=CONFIG`: pod names (`NS/NAME` after a `/`), node names as
/// `NODE=` (no space after), then the workload configs; file names when nothing answers.
const ZSH_LIVE: &str = r#"
# Live names for `gpuwl explain` (pods) and `gpuwl relabel` (nodes), from `gpuwl __complete`.
(( $+functions[_gpuwl_live] )) ||
_gpuwl_live() {
    local -a typed more done
    local c
    typed=(${(z)LBUFFER})
    [[ "$LBUFFER" == *[[:space:]] ]] && typed+=('')
    for c in ${(f)"$(gpuwl __complete "${(@)typed[2,-1]}" 2>/dev/null)"}; do
        [[ -z "$c" || "$c" == :* ]] && continue
        if [[ "$c" == *= ]]; then more+=("$c"); else done+=("$c"); fi
    done
    (( ${#more} )) && compadd -S '' -- "${more[@]}"
    (( ${#done} )) && compadd -- "${done[@]}"
    (( ${#more} + ${#done} )) || _default
}
"#;

/// The positional arguments whose zsh action becomes `_gpuwl_live` (clap gives them
/// `_default`, file names): explain's target and name, relabel's and whatif relabel's
/// `NODE=CONFIG` list, as clap's zsh generator writes their specs.
const ZSH_LIVE_ARGS: [&str; 3] = ["'::target -- ", "'::target_name -- ", "'*::relabels -- "];

/// The completion script for `shell`.
///
/// Errors: none today; the `Result` covers a generator that cannot find what it patches
/// (the zsh target action), reported as a runtime failure.
pub fn script(shell: clap_complete::Shell) -> Result<Vec<u8>> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "gpuwl", &mut out);
    // clap's generators offer hidden subcommands (bash among its words, zsh and fish
    // through `help`'s list): the `__complete*` helpers and the processes `cluster up`
    // supervises (`cluster supervise`, `emulate-*`) are never for a user's <TAB>.
    let hidden = hidden_subcommands(&Cli::command());
    out = without_hidden(&String::from_utf8_lossy(&out), &hidden).into_bytes();
    match shell {
        clap_complete::Shell::Bash => {
            out.extend_from_slice(bash_pods().as_bytes());
        }
        clap_complete::Shell::Zsh => {
            let text = String::from_utf8_lossy(&out).into_owned();
            let mut patched = String::with_capacity(text.len() + ZSH_LIVE.len());
            let mut found = [false; ZSH_LIVE_ARGS.len()];
            for line in text.split_inclusive('\n') {
                let spec = line.trim_start();
                match ZSH_LIVE_ARGS.iter().position(|a| spec.starts_with(a)) {
                    Some(i) if line.contains(":_default'") => {
                        found[i] = true;
                        patched.push_str(&line.replacen(":_default'", ":_gpuwl_live'", 1));
                    }
                    _ => patched.push_str(line),
                }
            }
            if let Some(i) = found.iter().position(|f| !f) {
                return Err(Error::Runtime(format!(
                    "zsh completion: {} not found in clap's script",
                    ZSH_LIVE_ARGS[i].trim_matches(|c| c == '\'' || c == ' ')
                )));
            }
            out = format!("{ZSH_LIVE}{patched}").into_bytes();
        }
        _ => {}
    }
    Ok(out)
}

/// The names of every hidden subcommand under `cmd`, at any depth.
fn hidden_subcommands(cmd: &clap::Command) -> std::collections::BTreeSet<String> {
    let mut v = std::collections::BTreeSet::new();
    for c in cmd.get_subcommands() {
        if c.is_hide_set() {
            v.insert(c.get_name().to_owned());
        }
        v.extend(hidden_subcommands(c));
    }
    v
}

/// A generated completion script without the `hidden` subcommands among what it offers:
/// bash's `opts="…"` word lists, zsh's `'name:description'` entries and fish's
/// `-a "name"` lines.
fn without_hidden(text: &str, hidden: &std::collections::BTreeSet<String>) -> String {
    let mut kept = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        let zsh = t
            .strip_prefix('\'')
            .and_then(|r| r.split_once(':'))
            .is_some_and(|(n, _)| hidden.contains(n));
        let fish = hidden
            .iter()
            .any(|n| line.contains(&format!(" -a \"{n}\"")));
        if zsh || fish {
            continue;
        }
        match line.find("opts=\"") {
            Some(at) => {
                let (head, words) = line.split_at(at + "opts=\"".len());
                let (words, tail) = words.split_once('"').unwrap_or((words, ""));
                let visible: Vec<&str> =
                    words.split(' ').filter(|w| !hidden.contains(*w)).collect();
                kept.push_str(&format!("{head}{}\"{tail}", visible.join(" ")));
            }
            None => kept.push_str(line),
        }
    }
    kept
}

/// Writes the completion script for `shell` to stdout.
///
/// Errors: [`Error::Write`] when stdout fails.
pub fn run(shell: clap_complete::Shell) -> Result<ExitStatus> {
    let s = script(shell)?;
    render::write_stdout(&s)
        .map(|_| ExitStatus::Ok)
        .map_err(|e| Error::write("the completion script", e))
}

/// Pod names in the namespace of `namespace` (else the context's), from the cluster
/// `live` reaches; each request waits at most 3 s. Only DNS-label-shaped names are kept, so
/// nothing a completion offers can carry a control character. Any failure gives `[]`.
fn pod_names(live: &ClusterArgs, namespace: Option<String>) -> Vec<String> {
    names(live, Lookup::Pods(namespace))
}

/// What a completion asks the live cluster for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Pod names in this namespace (else the context's).
    Pods(Option<String>),
    /// Node names.
    Nodes,
}

/// The names `what` asks for, from the cluster `live` reaches (see [`pod_names`]).
fn names(live: &ClusterArgs, what: Lookup) -> Vec<String> {
    let mut live = live.clone();
    live.request_timeout = live.request_timeout.min(3);
    let names = live.block_on(|client| async move {
        let lp = kube::api::ListParams::default().limit(500);
        let list = match what {
            Lookup::Pods(namespace) => {
                let ns = namespace.unwrap_or_else(|| client.default_namespace().to_owned());
                let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
                    kube::Api::namespaced(client, &ns);
                api.list_metadata(&lp)
                    .await
                    .map_err(|e| live::api_error("list pods", &e))?
                    .items
                    .into_iter()
                    .filter_map(|p| p.metadata.name)
                    .collect::<Vec<_>>()
            }
            Lookup::Nodes => {
                let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
                api.list_metadata(&lp)
                    .await
                    .map_err(|e| live::api_error("list nodes", &e))?
                    .items
                    .into_iter()
                    .filter_map(|p| p.metadata.name)
                    .collect::<Vec<_>>()
            }
        };
        Ok(list)
    });
    names
        .unwrap_or_default()
        .into_iter()
        .filter(|n| {
            n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        })
        .collect()
}

/// Runs the hidden `gpuwl __complete-pods`: pod names, one per line, in the namespace of
/// `-n` or the context's. Waits at most 3 s per request; any failure prints nothing and
/// exits 0, so a completion never shows an error.
pub fn run_pods(args: &PodsArgs) -> Result<ExitStatus> {
    let mut out = String::new();
    for n in pod_names(&args.live, args.namespace.clone()) {
        out.push_str(&n);
        out.push('\n');
    }
    let _ = render::write_stdout(out.as_bytes());
    Ok(ExitStatus::Ok)
}

/// The name kubectl (≥ 1.26) runs to complete a plugin's arguments: `kubectl_complete-`
/// and the plugin's name (kubernetes/kubectl `pkg/cmd/plugin`, plugin completion). gpuwl
/// linked under this name answers as `gpuwl __complete`.
pub const KUBECTL_HELPER: &str = "kubectl_complete-gpuwl";

/// Cobra's completion directives, the last line `:<n>` of a `__complete` answer (kubectl
/// reads them from a plugin's `kubectl_complete-<plugin>` helper; spf13/cobra
/// `completions.go`, `ShellCompDirective`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Directive {
    /// Let the shell complete file names when nothing is offered (0).
    Default = 0,
    /// Offer only what is listed, never file names (4).
    NoFileComp = 4,
    /// As [`Directive::NoFileComp`], and no space after the word (2 + 4): a node name
    /// offered as `NODE=` goes on with its workload config.
    NoSpaceNoFileComp = 6,
}

/// What to offer for the words typed after `gpuwl` (or `kubectl gpuwl`); the last word is
/// the one being completed (empty for a new word). Subcommands and their aliases, long
/// flags (after `-`), a flag's possible values (after `-o`, or `completions`' shell), and
/// pod names for `explain`'s target (through `pods`, given the namespace / kubeconfig /
/// context flags typed so far). Hidden commands and flags are never offered.
pub(crate) fn candidates(
    words: &[String],
    lookup: &dyn Fn(&ClusterArgs, Lookup) -> Vec<String>,
) -> (Vec<String>, Directive) {
    let pods = |live: &ClusterArgs, ns: Option<String>| lookup(live, Lookup::Pods(ns));
    let mut cmd = Cli::command();
    cmd.build();
    let (cur, done) = match words.split_last() {
        Some((c, d)) => (c.as_str(), d),
        None => ("", &[][..]),
    };
    let mut path: Vec<String> = Vec::new();
    let mut positionals = 0usize;
    let mut typed: Vec<&str> = Vec::new();
    let mut live = ClusterArgs::default();
    let mut namespace = None;
    let mut pending_value: Option<clap::Arg> = None;
    let mut cmd_ref = cmd.clone();
    for w in done {
        if let Some(arg) = pending_value.take() {
            match arg.get_id().as_str() {
                "namespace" => namespace = Some(w.clone()),
                "kubeconfig" => live.kubeconfig = Some(w.into()),
                "context" => live.context = Some(w.clone()),
                _ => {}
            }
            continue;
        }
        if w == "--" {
            continue;
        }
        if let Some(flag) = w.strip_prefix("--") {
            if flag.contains('=') {
                continue;
            }
            if let Some(a) = cmd_ref.get_arguments().find(|a| a.get_long() == Some(flag))
                && a.get_action().takes_values()
            {
                pending_value = Some(a.clone());
            }
            continue;
        }
        if let Some(short) = w.strip_prefix('-').filter(|s| s.len() == 1) {
            let c = short.chars().next().unwrap_or('-');
            if let Some(a) = cmd_ref.get_arguments().find(|a| a.get_short() == Some(c))
                && a.get_action().takes_values()
            {
                pending_value = Some(a.clone());
            }
            continue;
        }
        if w.starts_with('-') {
            continue;
        }
        match cmd_ref.find_subcommand(w).cloned() {
            Some(sub) if positionals == 0 => {
                path.push(sub.get_name().to_owned());
                cmd_ref = sub;
            }
            _ => {
                positionals += 1;
                typed.push(w);
            }
        }
    }
    let filter = |items: Vec<String>| -> Vec<String> {
        let mut v: Vec<String> = items.into_iter().filter(|i| i.starts_with(cur)).collect();
        v.sort();
        v.dedup();
        v
    };
    if let Some(arg) = pending_value {
        let values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| v.get_name().to_owned())
            .collect();
        if values.is_empty() {
            // A file, a name, a number: the shell's own (file) completion.
            return (Vec::new(), Directive::Default);
        }
        return (filter(values), Directive::NoFileComp);
    }
    if cur.starts_with('-') {
        let mut flags: Vec<String> = cmd_ref
            .get_arguments()
            .filter(|a| !a.is_hide_set() && !a.is_positional())
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        flags.push("--help".into());
        return (filter(flags), Directive::NoFileComp);
    }
    if cmd_ref.has_subcommands() && positionals == 0 {
        let subs: Vec<String> = cmd_ref
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| c.get_name().to_owned())
            .collect();
        return (filter(subs), Directive::NoFileComp);
    }
    // explain's target: a pod name, or `NS/NAME` in the namespace typed before the `/`;
    // after the kind `pod` too (`explain pod NS/`).
    let kind_pod = matches!(typed.as_slice(), ["pod" | "pods" | "po"]);
    if path.first().map(String::as_str) == Some("explain") && (positionals == 0 || kind_pod) {
        return match cur.split_once('/') {
            Some((ns, _)) => (
                filter(
                    pods(&live, Some(ns.to_owned()))
                        .into_iter()
                        .map(|p| format!("{ns}/{p}"))
                        .collect(),
                ),
                Directive::NoFileComp,
            ),
            None => (filter(pods(&live, namespace)), Directive::NoFileComp),
        };
    }
    // relabel's and whatif relabel's NODE=CONFIG: node names (as `NODE=`), then the
    // workload configs after the `=`.
    let relabel = matches!(
        path.iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice(),
        ["relabel"] | ["whatif", "relabel"]
    );
    if relabel {
        let (items, directive) = relabel_candidates(cur, &live, lookup);
        return (filter(items), directive);
    }
    let values: Vec<String> = cmd_ref
        .get_positionals()
        .nth(positionals)
        .map(|a| {
            a.get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_owned())
                .collect()
        })
        .unwrap_or_default();
    if values.is_empty() {
        (Vec::new(), Directive::Default)
    } else {
        (filter(values), Directive::NoFileComp)
    }
}

/// relabel's and whatif relabel's NODE=CONFIG being typed (`cur`): node names as `NODE=`
/// (no space after), then the workload configs after the `=`. Unfiltered.
fn relabel_candidates(
    cur: &str,
    live: &ClusterArgs,
    lookup: &dyn Fn(&ClusterArgs, Lookup) -> Vec<String>,
) -> (Vec<String>, Directive) {
    match cur.split_once('=') {
        Some((node, _)) => (
            WorkloadConfig::ALL
                .iter()
                .map(|w| format!("{node}={w}"))
                .collect(),
            Directive::NoFileComp,
        ),
        None => (
            lookup(live, Lookup::Nodes)
                .into_iter()
                .map(|n| format!("{n}="))
                .collect(),
            Directive::NoSpaceNoFileComp,
        ),
    }
}

/// Runs the hidden `gpuwl __complete WORD...`: one candidate per line, then `:<directive>`,
/// the protocol kubectl (≥ 1.26) speaks with a plugin's `kubectl_complete-gpuwl` helper
/// (gpuwl linked as [`KUBECTL_HELPER`] answers the same). Never fails: a cluster that does not answer
/// within 3 s gives no pod names.
pub fn run_complete(words: &[String]) -> Result<ExitStatus> {
    let (items, directive) = candidates(words, &names);
    let mut out = String::new();
    for i in items {
        out.push_str(&i);
        out.push('\n');
    }
    out.push_str(&format!(":{}\n", directive as u8));
    let _ = render::write_stdout(out.as_bytes());
    Ok(ExitStatus::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        let mut v: Vec<String> = s.split(' ').map(str::to_owned).collect();
        if s.is_empty() {
            v = vec![String::new()];
        }
        v
    }

    fn no_pods(_: &crate::input::live::ClusterArgs, _: Lookup) -> Vec<String> {
        Vec::new()
    }

    #[test]
    fn complete_offers_visible_subcommands_only() {
        let (c, d) = candidates(&words(""), &no_pods);
        assert!(c.contains(&"check".to_string()) && c.contains(&"explain".to_string()));
        assert!(
            !c.iter().any(|w| w.starts_with("__")),
            "hidden commands offered: {c:?}"
        );
        assert_eq!(d, Directive::NoFileComp);
        let (c, _) = candidates(&words("in"), &no_pods);
        assert_eq!(c, vec!["inventory".to_string()]);
        let (c, _) = candidates(&words("cluster s"), &no_pods);
        assert_eq!(c, vec!["status".to_string()]);
    }

    #[test]
    fn complete_offers_flags_and_their_values() {
        let (c, _) = candidates(&words("check --clu"), &no_pods);
        assert_eq!(c, vec!["--cluster-policy".to_string()]);
        let (c, d) = candidates(&words("inventory -o "), &no_pods);
        assert!(
            c.contains(&"json".to_string()) && c.contains(&"csv".to_string()),
            "{c:?}"
        );
        assert_eq!(d, Directive::NoFileComp);
        // A file-valued flag leaves the completion to the shell.
        let (c, d) = candidates(&words("check --nodes "), &no_pods);
        assert!(c.is_empty());
        assert_eq!(d, Directive::Default);
        let (c, _) = candidates(&words("completions z"), &no_pods);
        assert_eq!(c, vec!["zsh".to_string()]);
    }

    #[test]
    fn complete_offers_pods_for_explain_in_the_typed_namespace() {
        let seen = std::cell::RefCell::new(None);
        let pods = |live: &crate::input::live::ClusterArgs, what: Lookup| {
            let Lookup::Pods(ns) = what else {
                return Vec::new();
            };
            *seen.borrow_mut() = Some((live.context.clone(), ns));
            vec![
                "job-cross".to_string(),
                "job-container".to_string(),
                "vmi-x".to_string(),
            ]
        };
        let (c, d) = candidates(&words("explain -n gpu-vm --context lab job-c"), &pods);
        assert_eq!(
            c,
            vec!["job-container".to_string(), "job-cross".to_string()]
        );
        assert_eq!(d, Directive::NoFileComp);
        assert_eq!(
            seen.borrow().clone(),
            Some((Some("lab".to_string()), Some("gpu-vm".to_string())))
        );
    }

    /// Issue 54, item 9: pod names after `explain pod NS/` in that namespace, node names
    /// (as `NODE=`) then workload configs after `relabel` and `whatif relabel`.
    #[test]
    fn complete_offers_pods_after_a_kind_and_nodes_after_relabel() {
        let lookup = |_: &crate::input::live::ClusterArgs, what: Lookup| match what {
            Lookup::Pods(Some(ns)) if ns == "ml" => vec!["train-0".to_string()],
            Lookup::Pods(_) => vec!["job-cross".to_string()],
            Lookup::Nodes => vec!["gpu-a".to_string(), "gpu-b".to_string()],
        };
        let (c, d) = candidates(&words("explain pod ml/"), &lookup);
        assert_eq!(
            (c, d),
            (vec!["ml/train-0".to_string()], Directive::NoFileComp)
        );
        let (c, _) = candidates(&words("explain pod j"), &lookup);
        assert_eq!(c, vec!["job-cross".to_string()]);
        let (c, _) = candidates(&words("explain ml/t"), &lookup);
        assert_eq!(c, vec!["ml/train-0".to_string()]);
        for line in ["relabel ", "whatif relabel gpu-a=container "] {
            let (c, d) = candidates(&words(line), &lookup);
            assert_eq!(
                (c, d),
                (
                    vec!["gpu-a=".to_string(), "gpu-b=".to_string()],
                    Directive::NoSpaceNoFileComp
                ),
                "{line}"
            );
        }
        let (c, d) = candidates(&words("relabel gpu-b=vm-"), &lookup);
        assert_eq!(
            (c, d),
            (
                vec![
                    "gpu-b=vm-passthrough".to_string(),
                    "gpu-b=vm-vgpu".to_string()
                ],
                Directive::NoFileComp
            )
        );
        // The processes `cluster up` supervises are never offered.
        let (c, _) = candidates(&words("cluster "), &lookup);
        assert!(
            !c.iter()
                .any(|w| w == "supervise" || w.starts_with("emulate-")),
            "{c:?}"
        );
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let s = String::from_utf8(script(shell).unwrap()).unwrap();
            for l in s.lines() {
                for h in [
                    "supervise",
                    "emulate-device-plugins",
                    "emulate-virt-handler",
                ] {
                    let bash = l.contains("opts=\"")
                        && l.split('"')
                            .nth(1)
                            .is_some_and(|w| w.split(' ').any(|w| w == h));
                    let zsh = l.trim_start().starts_with(&format!("'{h}:"));
                    let fish = l.contains(&format!(" -a \"{h}\""));
                    assert!(!(bash || zsh || fish), "{shell}: {l}");
                }
            }
        }
    }

    #[test]
    fn bash_script_does_not_offer_hidden_commands() {
        let s = String::from_utf8(script(clap_complete::Shell::Bash).unwrap()).unwrap();
        let offered = s
            .lines()
            .filter(|l| l.contains("opts=\"") && l.contains("check"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(!offered.is_empty(), "top-level word list found");
        assert!(!offered.contains("__complete"), "{offered}");
    }

    #[test]
    fn bash_script_wraps_clap_and_offers_pods_after_explain() {
        let s = String::from_utf8(script(clap_complete::Shell::Bash).unwrap()).unwrap();
        assert!(s.contains("_gpuwl() {"), "clap's function is kept");
        assert!(s.contains("complete -F _gpuwl_with_pods"));
        assert!(s.contains("gpuwl __complete \"${COMP_WORDS[@]:1:COMP_CWORD}\""));
        // Every explain flag that takes a value is skipped (the word after it is its value).
        let pattern = explain_value_flags();
        let flags: Vec<&str> = pattern.split('|').collect();
        for f in [
            "-n",
            "--namespace",
            "--pod",
            "--nodes",
            "--pods",
            "--dra",
            "--snapshot",
            "--kubevirt",
            "--cluster-policy",
            "--kubeconfig",
            "--context",
            "-o",
            "--output",
            "--request-timeout",
        ] {
            assert!(flags.contains(&f), "{f} missing from {pattern}");
        }
        assert!(!flags.iter().any(|f| f.is_empty()), "{pattern}");
        assert!(s.contains(&format!("            {pattern}) ;;")), "{s}");
    }

    #[test]
    fn zsh_script_asks_gpuwl_for_pods_and_nodes() {
        let s = String::from_utf8(script(clap_complete::Shell::Zsh).unwrap()).unwrap();
        // explain's target and name, relabel's and whatif relabel's NODE=CONFIG.
        for spec in ["::target -- ", "::target_name -- ", "*::relabels -- "] {
            let lines: Vec<&str> = s.lines().filter(|l| l.contains(spec)).collect();
            let expected = if spec.starts_with('*') { 2 } else { 1 };
            assert_eq!(lines.len(), expected, "{spec}: {lines:?}");
            for l in lines {
                assert!(l.trim_end().ends_with(":_gpuwl_live' \\"), "{l}");
            }
        }
        assert!(s.contains("_gpuwl_live() {"));
        assert!(s.contains(r#"gpuwl __complete "${(@)typed[2,-1]}""#));
        // Node names end in `=`: offered without a space, so the config follows.
        assert!(s.contains("compadd -S '' -- \"${more[@]}\""));
        // Nothing else lost its file-name completion.
        assert_eq!(s.matches(":_gpuwl_live'").count(), 4, "{s}");
    }
}
