# Sourced once by check_standin.sh (K: the first kubectl, on the
# stand-in): what rover-operator needs of the API server.  The
# ElasticJob CustomResourceDefinition (docker/k8s/base/crd-elasticjob.yaml)
# served through discovery; custom objects checked against its schema (a
# bad spec refused naming the field); the status subresource; printer
# columns; Services; Leases (a stale update refused); an ElasticJob's
# owned objects gone with it; a deleted CRD's kind no longer served.
d="$TMP/custom"
mkdir -p "$d"
ej_yaml() { # NAME REPLICAS STRATEGY
  cat <<EOT
apiVersion: elastic.rover.dev/v1alpha1
kind: ElasticJob
metadata: {name: $1}
spec:
  distributionStrategy: $3
  replicaSpecs:
    worker: {replicas: $2, template: {spec: {containers: [{name: main, image: w}]}}}
EOT
}

if "${K[@]}" apply -f "$top/docker/k8s/base/crd-elasticjob.yaml" >"$d/crd.out" 2>&1 &&
  "${K[@]}" api-resources 2>/dev/null | grep -q 'elasticjobs.*ej.*elastic.rover.dev/v1alpha1.*ElasticJob'; then
  ok "the ElasticJob CRD applies and kubectl api-resources finds elasticjobs (ej)"
else
  notok "CRD: $(cat "$d/crd.out")"
fi

ej_yaml good 2 AllreduceStrategy >"$d/good.yaml"
ej_yaml bad -1 AllreduceStrategy >"$d/bad.yaml"
ej_yaml bad2 2 Ring >"$d/bad2.yaml"
printf 'apiVersion: elastic.rover.dev/v1alpha1\nkind: ElasticJob\nmetadata: {name: bad3}\nspec: {distributionStrategy: AllreduceStrategy}\n' >"$d/bad3.yaml"
out=$("${K[@]}" apply -f "$d/good.yaml" 2>&1)
echo "$out" | grep -q 'elasticjob.elastic.rover.dev/good created' && ok "a good ElasticJob is created" ||
  notok "good ElasticJob: $out"
out=$("${K[@]}" apply -f "$d/bad.yaml" 2>&1)
if echo "$out" | grep -q 'The ElasticJob "bad" is invalid: spec.replicaSpecs.worker.replicas: Invalid value: -1: .*greater than or equal to 0'; then
  ok "replicas -1 is refused naming spec.replicaSpecs.worker.replicas"
else
  notok "bad replicas: $out"
fi
out=$("${K[@]}" apply -f "$d/bad2.yaml" 2>&1)
echo "$out" | grep -q 'spec.distributionStrategy: Unsupported value: "Ring"' &&
  ok "an unknown distributionStrategy is refused naming the field" || notok "bad strategy: $out"
out=$("${K[@]}" apply -f "$d/bad3.yaml" 2>&1)
echo "$out" | grep -q 'spec.replicaSpecs: Required value' &&
  ok "a spec without replicaSpecs is refused: Required value" || notok "no replicaSpecs: $out"
"${K[@]}" get ej bad bad2 bad3 >/dev/null 2>&1 && notok "a refused ElasticJob was stored"

# The status subresource: status only through it; generation follows spec.
"${K[@]}" patch ej good --type merge -p '{"status":{"phase":"Running"}}' >/dev/null 2>&1
ph=$("${K[@]}" get ej good -o jsonpath='{.status.phase}')
out=$(curl -s -X PATCH -H 'Content-Type: application/merge-patch+json' \
  --data '{"status":{"phase":"Running","restarts":2}}' \
  "$SERVER/apis/elastic.rover.dev/v1alpha1/namespaces/default/elasticjobs/good/status")
gen1=$("${K[@]}" get ej good -o jsonpath='{.metadata.generation}')
"${K[@]}" patch ej good --type merge -p '{"spec":{"replicaSpecs":{"worker":{"replicas":3}}}}' >/dev/null 2>&1
gen2=$("${K[@]}" get ej good -o jsonpath='{.metadata.generation}')
if [ -z "$ph" ] && jqok "$out" '.status.phase == "Running" and .status.restarts == 2' &&
  [ "$gen1" = 1 ] && [ "$gen2" = 2 ]; then
  ok "status changes only through the status subresource; generation follows the spec (1, 2)"
else
  notok "status subresource: main path phase '$ph', /status $out, generation $gen1 $gen2"
fi
out=$(curl -s -X PATCH -H 'Content-Type: application/merge-patch+json' --data '{"status":{"phase":"Done"}}' \
  "$SERVER/apis/elastic.rover.dev/v1alpha1/namespaces/default/elasticjobs/good/status")
jqok "$out" '.code == 422 and (.message | contains("status.phase: Unsupported value"))' &&
  ok "a status outside the schema is refused (422, status.phase)" || notok "bad status: $out"
out=$("${K[@]}" get ej 2>&1)
echo "$out" | head -1 | grep -q 'NAME *PHASE *WORKERS *RESTARTS *AGE' && echo "$out" | grep -q 'good *Running *2' &&
  ok "kubectl get ej prints the printer columns (NAME PHASE WORKERS RESTARTS AGE)" || notok "columns: $out"

# A Service and a Lease owned by the job; a Lease update from a stale version.
uid=$("${K[@]}" get ej good -o jsonpath='{.metadata.uid}')
own="ownerReferences: [{apiVersion: elastic.rover.dev/v1alpha1, kind: ElasticJob, name: good, uid: $uid, controller: true}]"
printf 'apiVersion: v1\nkind: Service\nmetadata: {name: good-master, %s}\nspec: {selector: {app: x}, ports: [{port: 50001}]}\n' "$own" >"$d/svc.yaml"
printf 'apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: good-lease, %s}\nspec: {holderIdentity: a, leaseDurationSeconds: 15}\n' "$own" >"$d/lease.yaml"
"${K[@]}" apply -f "$d/svc.yaml" >/dev/null 2>&1
"${K[@]}" apply -f "$d/lease.yaml" >/dev/null 2>&1
ip=$("${K[@]}" get svc good-master -o jsonpath='{.spec.clusterIP}')
rv=$("${K[@]}" get lease good-lease -o jsonpath='{.metadata.resourceVersion}')
"${K[@]}" get lease good-lease -o json | jq '.spec.holderIdentity = "b"' >"$d/l2.json"
"${K[@]}" replace -f "$d/l2.json" >/dev/null 2>&1
out=$("${K[@]}" get lease good-lease -o json | jq ".spec.holderIdentity = \"c\" | .metadata.resourceVersion = \"$rv\"" |
  "${K[@]}" replace -f - 2>&1)
holder=$("${K[@]}" get lease good-lease -o jsonpath='{.spec.holderIdentity}')
if [ -n "$ip" ] && [ "$holder" = b ] && echo "$out" | grep -q 'the object has been modified'; then
  ok "a Service gets a cluster IP; a Lease replaced from a stale resourceVersion is a Conflict"
else
  notok "service ip '$ip', lease holder '$holder': $out"
fi
"${K[@]}" delete ej good --timeout=20s >/dev/null 2>&1
wait_for 10 sh -c "! ${K[*]} get svc good-master"
out=$("${K[@]}" get svc good-master 2>&1; "${K[@]}" get lease good-lease 2>&1)
[ "$(echo "$out" | grep -c 'not found')" = 2 ] &&
  ok "deleting the ElasticJob deletes the Service and Lease it owns" || notok "owned objects: $out"

# metadata.finalizers hold a deletion, garbage collection's too, until the last is taken off
"${K[@]}" apply -f "$d/good.yaml" >/dev/null 2>&1
uid=$("${K[@]}" get ej good -o jsonpath='{.metadata.uid}')
printf '{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"held","finalizers":["test.rover.dev/hold"],"ownerReferences":[{"apiVersion":"elastic.rover.dev/v1alpha1","kind":"ElasticJob","name":"good","uid":"%s"}]},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}\n' "$uid" |
  "${K[@]}" apply -f - >/dev/null 2>&1
"${K[@]}" delete ej good --timeout=20s >/dev/null 2>&1
sleep 0.5
held=$("${K[@]}" get pvc held -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null)
"${K[@]}" patch pvc held --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
gone=$("${K[@]}" get pvc held 2>&1)
if [[ $held =~ ^20[0-9-]+T ]] && echo "$gone" | grep -q "not found"; then
  ok "a finalizer keeps an owned claim after its owner's deletion (deletionTimestamp set) until it is taken off"
else
  notok "finalizers: held '$held', then: $gone"
fi

"${K[@]}" apply -f "$d/good.yaml" >/dev/null 2>&1
"${K[@]}" delete crd elasticjobs.elastic.rover.dev >/dev/null 2>&1
out=$("${K[@]}" get --raw /apis/elastic.rover.dev/v1alpha1/namespaces/default/elasticjobs/good 2>&1)
echo "$out" | grep -q 'NotFound\|not found' && ! "${K[@]}" api-resources 2>/dev/null | grep -q elasticjobs &&
  ok "a deleted CRD's kind and objects are gone" || notok "after deleting the CRD: $out"

# limit and continue: pages of one, kubectl's --chunk-size follows them.
"${K[@]}" apply -f "$top/docker/k8s/base/crd-elasticjob.yaml" >/dev/null 2>&1
for n in p1 p2 p3; do ej_yaml $n 1 AllreduceStrategy | "${K[@]}" apply -f - >/dev/null 2>&1; done
out=$("${K[@]}" get --raw '/apis/elastic.rover.dev/v1alpha1/namespaces/default/elasticjobs?limit=1')
next=$(printf '%s' "$out" | jq -r '.metadata.continue // empty')
out2=$("${K[@]}" get --raw "/apis/elastic.rover.dev/v1alpha1/namespaces/default/elasticjobs?limit=5&continue=$next")
names=$("${K[@]}" get ej --chunk-size=1 -o name 2>&1 | tr '\n' ' ')
if jqok "$out" '(.items | length) == 1 and .items[0].metadata.name == "p1"' && [ -n "$next" ] &&
  jqok "$out2" '(.items | length) == 2 and (.metadata.continue == null)' &&
  [ "$names" = "elasticjob.elastic.rover.dev/p1 elasticjob.elastic.rover.dev/p2 elasticjob.elastic.rover.dev/p3 " ]; then
  ok "lists page with limit and continue (kubectl --chunk-size=1 reads all three)"
else
  notok "pages: $out / $out2 / $names"
fi
