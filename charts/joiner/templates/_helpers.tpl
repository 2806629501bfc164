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

{{- define "joiner.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
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
{{- end }}

{{/* Fails the render on settings that cannot work. */}}
{{- define "joiner.validate" -}}
{{- $s := .Values.settings }}
{{- $_ := required "settings.clusterName is required" $s.clusterName }}
{{- if eq $s.cloudProvider "aws" }}
{{- $_ := required "settings.clusterEndpoint is required with settings.cloudProvider aws" $s.clusterEndpoint }}
{{- end }}
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
