#!/usr/bin/env bash
# Suite for docker/k8s/: the manifests a platform team deploys, judged by
# kubectl against the Kubernetes stand-in.  With every kubectl found
# (`command -v kubectl` and each path in KUBECTL_EXTRA; Debian's is 1.20,
# whose kustomize is 2.0): each overlay renders with `kubectl kustomize`,
# no cluster-scoped object with a namespace and every other in rover, and
# every object it renders is accepted by `kubectl apply --dry-run=client`.  With the first: by `--dry-run=server` too (the
# namespace made first, as on a real server), then applied for real and
# read back, a second apply changing nothing; the digits ElasticJob
# (docker/k8s/examples/) is accepted by the CRD's schema.  RBAC: the verbs
# of the master's ClusterRole, the monitor's ClusterRole and the operator's
# ClusterRole and Role are exactly those the code calls, read from the
# stand-in's audit log of real runs (the master's k8s backend through
# tests/master/check_sched_k8s; rover-monitor --k8s and rover-operator
# through a job's life here), each request attributed by its bearer token
# as an API server's audit log would.  Prints one "ok"/"not ok" line per check and exits 1 if
# any failed.  No kubectl: a skip (a failure under CI=true).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
# shellcheck source=tests/k8s/suite.sh
. "$top/tests/k8s/suite.sh"

TMP=$(mktemp -d /tmp/rover-manifests-test.XXXXXX)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
	done
	if [ -n "${K8S_KEEP:-}" ]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# A stand-in of one node; its kubeconfig (token $2, "" none) in $1.kubeconfig.
standin() { # name token
	"$STANDIN" --port-file "$TMP/$1.port" --dir "$TMP/$1.pods" --nodes 1 \
		--audit-log "$TMP/$1.audit" >"$TMP/$1.log" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 100); do [ -s "$TMP/$1.port" ] && break; sleep 0.1; done
	local user="{}"
	[ -n "$2" ] && user="{token: $2}"
	# kubectl's own requests go in as no one ("-" in the audit log)
	local admin="$TMP/$1.admin.kubeconfig"
	cat >"$TMP/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: s
  cluster: {server: "http://127.0.0.1:$(cat "$TMP/$1.port" 2>/dev/null)"}
contexts:
- name: s
  context: {cluster: s, namespace: default, user: u}
users:
- name: u
  user: $user
current-context: s
EOF
	sed 's/^  user: {token: .*}$/  user: {}/' "$TMP/$1.kubeconfig" >"$admin"
	[ -s "$TMP/$1.port" ]
}

# "KIND NAMESPACE" of each object of a rendered file ("-" none).
namespaces() {
	awk 'function out() { if (k != "") print k, n; k = ""; n = "-"; md = 0 }
		BEGIN { n = "-" } /^---/ { out(); next } /^kind: / { k = $2 }
		/^metadata:/ { md = 1; next } /^[^ #]/ { md = 0 }
		md && /^  namespace: / { n = $2 } END { out() }' "$1"
}

# ok when OUT (kubectl's output) says PATTERN (an ERE) for each of the N
# objects of the overlay; else notok and OUT's other lines.
accepted() { # what overlay n pattern out
	local got
	got=$(grep -Ec "$4" <<<"$5")
	if [ "$got" = "$3" ]; then
		ok "$1 accepts each of the $3 objects of overlays/$2"
	else
		notok "$1: $got of $3 objects of overlays/$2 accepted"
		grep -Ev "$4" <<<"$5" | head -5 | sed 's/^/    /'
	fi
}
# The kinds docker/k8s/ renders that an API server keeps outside namespaces.
cluster_kinds='^(Namespace|CustomResourceDefinition|ClusterRole|ClusterRoleBinding|ValidatingAdmissionPolicy|ValidatingAdmissionPolicyBinding)$'

overlays=()
for d in docker/k8s/overlays/*/; do overlays+=("$(basename "$d")"); done
standin api "" || {
	notok "the stand-in did not start"
	cat "$TMP/api.log"
	exit 1
}

# ---- every kubectl: render, then a client-side dry run of each object ----
# the newest kubectl does the rest: before 1.27 kubectl reads dry-run
# support from OpenAPI v2, which the stand-in serves empty
knew= vnew= mnew=-1
for k in "${kubectls[@]}"; do
	v=$("$k" version --client 2>/dev/null | grep -o 'v1\.[0-9]*' | head -1)
	[ "${v#v1.}" -gt "$mnew" ] 2>/dev/null && knew=$k vnew=$v mnew=${v#v1.}
	for o in "${overlays[@]}"; do
		y="$TMP/$o-$v.yaml"
		if ! "$k" kustomize "docker/k8s/overlays/$o" >"$y" 2>"$TMP/err"; then
			notok "kubectl $v kustomize overlays/$o: $(head -3 "$TMP/err")"
			continue
		fi
		n=$(grep -c '^kind:' "$y")
		ok "kubectl $v kustomize overlays/$o renders $n objects"
		bad=$(namespaces "$y" | awk -v c="$cluster_kinds" '$1 ~ c ? $2 != "-" : $2 != "rover"')
		nc=$(namespaces "$y" | awk -v c="$cluster_kinds" '$1 ~ c' | wc -l)
		if [ -z "$bad" ] && [ "$nc" -ge 8 ]; then
			ok "kubectl $v kustomize overlays/$o: the $nc cluster-scoped objects carry no namespace, every other one is in rover"
		else
			notok "kubectl $v kustomize overlays/$o: namespaces wrong ($nc cluster-scoped): $(echo $bad)"
		fi
		out=$("$k" --kubeconfig "$TMP/api.kubeconfig" apply --dry-run=client -f "$y" 2>&1)
		accepted "kubectl $v apply --dry-run=client" "$o" "$n" 'created \(dry run\)' "$out"
	done
done

# the admission policy that keeps a master to its own job's pods, and its
# binding, as rendered (the stand-in stores them; it evaluates no CEL)
y="$TMP/external-db-$vnew.yaml"
pol=$(yq_kind() { awk -v k="$1" '/^---/{p=0} $0 == "kind: " k {p=1} p' "$y"; }
	yq_kind ValidatingAdmissionPolicy)
if grep -q '^apiVersion: admissionregistration.k8s.io/v1$' "$y" &&
	grep -q "split(':')\[3\].startsWith('rover-master-')" <<<"$pol" &&
	grep -q "labels\['rover.dev/job'\] == variables.job" <<<"$pol" &&
	grep -q '^kind: ValidatingAdmissionPolicyBinding$' "$y" &&
	grep -q 'policyName: rover-master-own-job' "$y"; then
	ok "the rendered manifests hold the master's admission policy (its own job's pods only) and its binding"
else
	notok "no admission policy for the masters in the rendered overlays/external-db"
fi

# ---- the newest kubectl: server dry run, a real apply, read back ----
k=${knew:-${kubectls[0]}}
kc=(--kubeconfig "$TMP/api.kubeconfig")
# (kubectl create namespace sends protobuf, which the stand-in does not read)
echo '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"rover"}}' |
	"$k" "${kc[@]}" apply -f - >/dev/null || notok "the namespace rover could not be made"
for o in "${overlays[@]}"; do
	y="$TMP/$o-$vnew.yaml"
	[ -s "$y" ] || continue
	if [ "$mnew" -lt 27 ]; then
		echo "ok - # SKIP apply --dry-run=server of overlays/$o: kubectl $vnew reads dry-run support from OpenAPI v2, which the stand-in serves empty"
		continue
	fi
	n=$(grep -c '^kind:' "$y")
	out=$("$k" "${kc[@]}" apply --dry-run=server -f "$y" 2>&1)
	accepted "apply --dry-run=server" "$o" "$n" '(created|configured|unchanged) \(server dry run\)' "$out"
done
y="$TMP/embedded-db-$vnew.yaml"
if out=$("$k" "${kc[@]}" apply -f "$y" 2>&1); then
	ok "overlays/embedded-db applied: $(grep -c created <<<"$out") objects created"
else
	notok "overlays/embedded-db applied: $out"
fi
if out=$("$k" "${kc[@]}" apply -f "$y" 2>&1) && ! grep -qv unchanged <<<"$out"; then
	ok "applied again, every object of overlays/embedded-db is unchanged"
else
	notok "applied again, overlays/embedded-db changed: $(grep -v unchanged <<<"$out" | head -3)"
fi
if out=$("$k" "${kc[@]}" -n rover get deployment rover-operator -o json 2>&1) &&
	[ "$(jq -r .spec.replicas <<<"$out")" = 2 ]; then
	ok "the controller's Deployment reads back with 2 replicas"
else
	notok "the controller's Deployment: $out"
fi
for ex in docker/k8s/examples/*.yaml; do
	out=
	if { [ "$mnew" -lt 27 ] || out=$("$k" "${kc[@]}" apply --dry-run=server -f "$ex" 2>&1); } &&
		out2=$("$k" "${kc[@]}" apply -f "$ex" 2>&1); then
		ok "$ex is accepted by the ElasticJob CRD's schema: $out2"
	else
		notok "$ex: $out ${out2:-}"
	fi
done

# ---- RBAC: the verbs granted against the requests the code makes ----
# A pod of job $2 that sleeps, as JSON (kubectl run sends protobuf, which
# the stand-in does not read).
pod() { # name job
	printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","labels":{"rover.dev/job":"%s"}},' "$1" "$2"
	printf '"spec":{"restartPolicy":"Never","containers":[{"name":"main","image":"x","command":["sleep","300"]}]}}\n'
}
# "GROUP RESOURCE VERB" lines, sorted, of the rules of a Role/ClusterRole.
granted() { # kind name [namespace]
	"$k" "${kc[@]}" ${3:+-n "$3"} get "$1" "$2" -o json | jq -r '.rules[] |
		.apiGroups[] as $g | .resources[] as $r | .verbs[] as $v |
		"\(if $g == "" then "-" else $g end) \($r) \($v)"' | sort -u
}
# The same from an audit log, for one user.
used() { # log user
	awk -v u="$2" '$1 == u { print $3, $4, $2 }' "$1" | sort -u
}
compare() { # what granted used
	if [ "$2" = "$3" ]; then
		ok "$1: the rules grant exactly what the code calls: $(echo $3 | tr '\n' ' ')"
	else
		notok "$1: the rules and the code differ"
		diff <(echo "$2") <(echo "$3") | sed 's/^</    granted, not called:/; s/^>/    called, not granted:/' | grep called
	fi
}

# the master's k8s backend, in a real run of its suite (its kubeconfig's token: t0k)
if out=$(K8S_STANDIN_AUDIT_LOG="$TMP/master.audit" "$B/tests/master/check_sched_k8s" 2>&1); then
	compare "the master's ClusterRole" "$(granted clusterrole rover-master)" "$(used "$TMP/master.audit" t0k)"
else
	notok "tests/master/check_sched_k8s failed, so the master's calls are unknown"
	tail -5 <<<"$out" | sed 's/^/    /'
fi

# rover-monitor --k8s on the stand-in's node, its token rover-monitor, for a few samples
standin mon rover-monitor || notok "the monitor's stand-in did not start"
pod w j | "$k" --kubeconfig "$TMP/mon.admin.kubeconfig" apply -f - >/dev/null
"$B/bin/rover-monitor" --k8s --kubeconfig "$TMP/mon.kubeconfig" --node node-0 \
	--brain http://127.0.0.1:1 --listen 127.0.0.1:0 --interval-ms 200 \
	--sample-gpu-interval-s 0 >"$TMP/monitor.log" 2>&1 &
mpid=$!
PIDS+=($mpid)
for _ in $(seq 50); do grep -q ' watch - pods' "$TMP/mon.audit" 2>/dev/null && break; sleep 0.1; done
sleep 1
kill -TERM $mpid 2>/dev/null
compare "the monitor's ClusterRole" "$(granted clusterrole rover-monitor)" \
	"$(used "$TMP/mon.audit" rover-monitor)"

# rover-operator, its token rover-operator, through a job's life: the digits
# ElasticJob gets its master pod (a stand-in that sleeps) and Service, a
# worker pod appears, the job is suspended (the master and the workers
# deleted); SIGTERM gives the Lease up
if [ -x "$B/bin/rover-operator" ] && standin op rover-operator; then
	ka=("$k" --kubeconfig "$TMP/op.admin.kubeconfig")
	"${ka[@]}" apply -f docker/k8s/base/crd-elasticjob.yaml >/dev/null
	echo '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"rover"}}' |
		"${ka[@]}" apply -f - >/dev/null
	"${ka[@]}" apply -f docker/k8s/examples/digits.yaml >/dev/null
	printf '#!/bin/sh\nexec sleep 300\n' >"$TMP/fake-master" && chmod +x "$TMP/fake-master"
	"$B/bin/rover-operator" --kubeconfig "$TMP/op.kubeconfig" --lease-namespace rover \
		--lease-renew-ms 200 --master-command "$TMP/fake-master" >"$TMP/operator.log" 2>&1 &
	opid=$!
	PIDS+=($opid)
	phase() { "${ka[@]}" -n rover get elasticjob digits -o jsonpath='{.status.phase}' 2>/dev/null; }
	for _ in $(seq 150); do [ "$(phase)" = Running ] && break; sleep 0.2; done
	# a worker pod, as the master would have made it
	pod digits-worker-0 digits | "${ka[@]}" -n rover apply -f - >/dev/null
	sleep 1
	"${ka[@]}" -n rover patch elasticjob digits --type merge -p '{"spec":{"suspend":true}}' >/dev/null
	for _ in $(seq 150); do [ "$(phase)" = Suspended ] && break; sleep 0.2; done
	[ "$(phase)" = Suspended ] ||
		notok "the operator never suspended the digits job: $(tail -3 "$TMP/operator.log")"
	kill -TERM $opid 2>/dev/null
	for _ in $(seq 50); do kill -0 $opid 2>/dev/null || break; sleep 0.1; done
	# bind is no request: the API server asks it of a RoleBinding's creator
	bind=$(granted clusterrole rover-operator | grep ' clusterroles bind$')
	names=$("$k" "${kc[@]}" get clusterrole rover-operator -o json |
		jq -c '[.rules[] | select(.verbs == ["bind"]) | .resourceNames]')
	if [ -n "$bind" ] && [ "$names" = '[["rover-master"]]' ]; then
		ok "the operator may bind the ClusterRole rover-master, and no other"
	else
		notok "the operator's bind: $bind $names"
	fi
	compare "the operator's ClusterRole and Role" \
		"$( (granted clusterrole rover-operator | grep -v ' clusterroles bind$'
			granted role rover-operator-leader rover) | sort -u)" \
		"$(used "$TMP/op.audit" rover-operator)"
	# the job's own service account and binding, and its state claim
	sa=$("${ka[@]}" -n rover get sa rover-master-digits -o jsonpath='{.metadata.ownerReferences[0].kind}' 2>&1)
	rb=$("${ka[@]}" -n rover get rolebinding rover-master-digits -o jsonpath='{.roleRef.name}' 2>&1)
	pvc=$("${ka[@]}" -n rover get pvc digits-master-state -o jsonpath='{.status.phase}' 2>&1)
	if [ "$sa" = ElasticJob ] && [ "$rb" = rover-master ] && [ "$pvc" = Bound ]; then
		ok "the digits job got its own service account, bound to rover-master, and its state claim"
	else
		notok "the digits job's service account ($sa), binding ($rb), claim ($pvc)"
	fi
else
	notok "no $B/bin/rover-operator, or its stand-in did not start"
fi
exit $failed
