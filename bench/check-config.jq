# The seed's check as a lab user would write it with jq (bench peer (a), see BENCHMARKS.md):
#   jq -r -f bench/check-config.jq nodes.json
# Only nodes labelled nvidia.com/gpu.workload.config are judged; a resource is advertised
# when allocatable (else capacity) > 0; gpu / MIG names are "container", names ending in a
# digit + capital letter are "vm-vgpu", other nvidia.com/ names "vm-passthrough";
# Network Operator names are skipped. Prints MISMATCH=<node> <reason> lines sorted by
# node, or OK=<labelled nodes>.
def gpu_class:
  if test("^(gpu|mig-([0-9]+c\\.)?[0-9]+g\\.[0-9]+gb.*)(\\.shared)?$") then "container"
  elif test("[0-9][A-Z]$") then "vm-vgpu"
  else "vm-passthrough" end;

[ .items[]
  | select(.metadata.labels["nvidia.com/gpu.workload.config"] != null) ] as $labelled
| [ $labelled[]
    | .metadata.name as $n
    | .metadata.labels["nvidia.com/gpu.workload.config"] as $want
    | ((.status.allocatable // .status.capacity) // {}) as $res
    | [ $res | to_entries[]
        | select(.key | startswith("nvidia.com/"))
        | .key |= ltrimstr("nvidia.com/")
        | select(.key | test("^(rdma_shared_device|hostdev|sriov)") | not)
        | select((.value | tonumber) > 0)
        | .key | gpu_class ] as $classes
    | if ($want | IN("container", "vm-passthrough", "vm-vgpu") | not) then
        "MISMATCH=\($n) label value \"\($want)\" is not container, vm-passthrough or vm-vgpu"
      elif ($classes | length) == 0 then
        "MISMATCH=\($n) labelled \($want) but advertises no GPU resource"
      elif ($classes | map(select(. != $want)) | length) > 0 then
        "MISMATCH=\($n) labelled \($want) but advertises \($classes | unique | join(","))"
      else empty end ]
| sort
| if length == 0 then "OK=\($labelled | length)" else .[] end
