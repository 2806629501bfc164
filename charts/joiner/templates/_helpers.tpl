{{/* The chart name. */}}
{{- define "joiner.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name prefix of every object (63 characters at most). */}}
{{- define "joiner.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "joiner.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "joiner.labels" -}}
helm.sh/chart: {{ include "joiner.chart" . }}
{{ include "joiner.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: controller
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels that select the controller pods (immutable on the Deployment). */}}
{{- define "joiner.selectorLabels" -}}
app.kubernetes.io/name: {{ include "joiner.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "joiner.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "joiner.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Karpenter's controller.image keys take the place of image's when set. */}}
{{- define "joiner.image" -}}
{{- $k := .Values.controller.image }}
{{- $repository := default .Values.image.repository $k.repository }}
{{- $digest := default .Values.image.digest $k.digest }}
{{- if $digest }}
{{- printf "%s@%s" $repository $digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .Chart.AppVersion (default .Values.image.tag $k.tag)) }}
{{- end }}
{{- end }}

{{/* Annotations of every object: Karpenter's additionalAnnotations. */}}
{{- define "joiner.annotations" -}}
{{- with .Values.additionalAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The metrics and health ports: Karpenter's controller.*.port keys win over settings' when set. */}}
{{- define "joiner.metricsPort" -}}
{{- $p := .Values.controller.metrics.port }}
{{- if kindIs "invalid" $p }}{{ .Values.settings.metricsPort }}{{ else }}{{ $p }}{{ end }}
{{- end }}
{{- define "joiner.healthProbePort" -}}
{{- $p := .Values.controller.healthProbe.port }}
{{- if kindIs "invalid" $p }}{{ .Values.settings.healthProbePort }}{{ else }}{{ $p }}{{ end }}
{{- end }}

{{/*
Karpenter settings joiner has no behaviour for: accepted so that a Karpenter values file renders,
never passed to the binary, and listed by NOTES.txt when set.
*/}}
{{- define "joiner.karpenterOnlySettings" -}}
- assumeRoleARN
- assumeRoleDuration
- vmMemoryOverheadPercent
- reservedENIs
- preferencePolicy
- minValuesPolicy
- eksControlPlane
- enableZonalShift
- ignoreDRARequests
- disableClusterStateObservability
- disableDryRun
- amiRefreshInterval
- subnetRefreshInterval
- awsFeatureGates
{{- end }}

{{/* FEATURE_GATES in Karpenter's format: every gate set in settings.featureGates, as Name=bool. */}}
{{- define "joiner.featureGates" -}}
{{- $pairs := list }}
{{- range $name, $on := .Values.settings.featureGates }}
{{- $pairs = append $pairs (printf "%s%s=%t" (upper (substr 0 1 $name)) (substr 1 -1 $name) $on) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{/*
A pod (anti-)affinity term list with the controller pods' selector added to every term without a
labelSelector, as Karpenter's chart does.
*/}}
{{- define "joiner.affinity" -}}
{{- $a := deepCopy .Values.affinity }}
{{- $selector := dict "matchLabels" (include "joiner.selectorLabels" . | fromYaml) }}
{{- range $kind := list "podAffinity" "podAntiAffinity" }}
{{- with get $a $kind }}
{{- range (get . "requiredDuringSchedulingIgnoredDuringExecution" | default list) }}
{{- if not (hasKey . "labelSelector") }}{{ $_ := set . "labelSelector" $selector }}{{ end }}
{{- end }}
{{- range (get . "preferredDuringSchedulingIgnoredDuringExecution" | default list) }}
{{- with .podAffinityTerm }}
{{- if not (hasKey . "labelSelector") }}{{ $_ := set . "labelSelector" $selector }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $a }}
{{- end }}

{{/*
The environment variable of each settings key. Keys missing here fail the render, so a new
setting cannot be forgotten silently (scripts/chart_check.py checks every name against the binary).
*/}}
{{- define "joiner.settingsEnv" -}}
clusterName: CLUSTER_NAME
clusterEndpoint: CLUSTER_ENDPOINT
clusterCABundle: CLUSTER_CA_BUNDLE
clusterCIDR: CLUSTER_CIDR
cloudProvider: JOINER_CLOUD_PROVIDER
region: AWS_REGION
interruptionQueue: INTERRUPTION_QUEUE
isolatedVPC: ISOLATED_VPC
awsEndpointUrl: AWS_ENDPOINT_URL
awsMaxAttempts: AWS_MAX_ATTEMPTS
kubernetesVersion: KUBERNETES_VERSION
catalog: JOINER_CATALOG
instanceGCGrace: JOINER_INSTANCE_GC_GRACE
strategy: JOINER_STRATEGY
disruptionStrategy: JOINER_DISRUPTION_STRATEGY
solverTimeLimit: JOINER_SOLVER_TIME_LIMIT
disruptionTimeLimit: JOINER_DISRUPTION_TIME_LIMIT
solverGap: JOINER_SOLVER_GAP
disableDisruption: JOINER_DISABLE_DISRUPTION
disruptionInterval: JOINER_DISRUPTION_INTERVAL
validationDelay: JOINER_VALIDATION_DELAY
launchTimeout: JOINER_LAUNCH_TIMEOUT
registrationTimeout: JOINER_REGISTRATION_TIMEOUT
disruptionCommandTimeout: JOINER_DISRUPTION_COMMAND_TIMEOUT
insufficientCapacityTTL: JOINER_INSUFFICIENT_CAPACITY_TTL
unschedulablePodRetry: JOINER_UNSCHEDULABLE_POD_RETRY
instanceGCInterval: JOINER_INSTANCE_GC_INTERVAL
batchIdleDuration: BATCH_IDLE_DURATION
batchMaxDuration: BATCH_MAX_DURATION
apiTimeout: JOINER_API_TIMEOUT
disableLeaderElection: DISABLE_LEADER_ELECTION
leaderElectionName: LEADER_ELECTION_NAME
leaseDuration: JOINER_LEASE_DURATION
renewDeadline: JOINER_RENEW_DEADLINE
retryPeriod: JOINER_RETRY_PERIOD
metricsPort: METRICS_PORT
healthProbePort: HEALTH_PROBE_PORT
bindAddress: JOINER_BIND_ADDRESS
simSeed: JOINER_SIM_SEED
logLevel: JOINER_LOG
logFormat: JOINER_LOG_FORMAT
featureGates: FEATURE_GATES
{{- end }}

{{/* Fails the render on settings that cannot work. */}}
{{- define "joiner.validate" -}}
{{- $s := .Values.settings }}
{{- $_ := required "settings.clusterName is required" $s.clusterName }}
{{- if and $s.disableLeaderElection (gt (int .Values.replicas) 1) }}
{{- fail "settings.disableLeaderElection needs replicas <= 1: replicas without leader election would all act" }}
{{- end }}
{{- end }}

{{/* A value as environment text: booleans true/false, whole numbers without an exponent. */}}
{{- define "joiner.envText" -}}
{{- if kindIs "bool" . }}
{{- ternary "true" "false" . }}
{{- else if or (kindIs "float64" .) (kindIs "int64" .) (kindIs "int" .) }}
{{- if eq (float64 .) (float64 (int64 .)) }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- else }}
{{- toString . }}
{{- end }}
{{- end }}
