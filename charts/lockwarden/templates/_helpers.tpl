{{/* The chart name, or nameOverride. */}}
{{- define "lockwarden.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object name: fullnameOverride, else the release name when it already contains
the chart name, else "<release>-<chart>". Truncated to 63 characters (DNS labels).
*/}}
{{- define "lockwarden.fullname" -}}
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

{{/* Labels that select the controller pods; never change them in an upgrade. */}}
{{- define "lockwarden.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lockwarden.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{/* Labels on every object. */}}
{{- define "lockwarden.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "lockwarden.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "lockwarden.imageTag" . | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: lockwarden
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels on the controller's objects: every label plus the component. */}}
{{- define "lockwarden.controllerLabels" -}}
{{ include "lockwarden.labels" . }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "lockwarden.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{/* repository:tag, or repository@digest when a digest is set. */}}
{{- define "lockwarden.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (include "lockwarden.imageTag" .) }}
{{- end }}
{{- end }}

{{- define "lockwarden.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "lockwarden.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name must name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The namespace whose Secrets the controller reads and where the built-in backend keeps Leases. */}}
{{- define "lockwarden.secretNamespace" -}}
{{- default .Release.Namespace .Values.secretNamespace }}
{{- end }}

{{- define "lockwarden.leaderElectionNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace }}
{{- end }}

{{/* The metrics endpoint's scheme, which also names the Service port: https unless metrics.secure is off. */}}
{{- define "lockwarden.metricsScheme" -}}
{{- if .Values.metrics.secure }}https{{ else }}http{{ end }}
{{- end }}

{{/*
Who provides the metrics endpoint's certificate when the chart must (metrics.tls.provider): empty
when metrics.tls.secretName names one, or nothing scrapes with a token the chart configures (no
ServiceMonitor, plain HTTP, a tlsConfig of the user's own), or the provider is none; otherwise
certManager or helm (auto: cert-manager when the cluster serves cert-manager.io/v1).
*/}}
{{- define "lockwarden.metricsTLSProvider" -}}
{{- $m := .Values.metrics -}}
{{- if or $m.tls.secretName (not $m.enabled) (not $m.secure) (not $m.serviceMonitor.enabled) $m.serviceMonitor.tlsConfig (eq $m.tls.provider "none") -}}
{{- else if eq $m.tls.provider "auto" -}}
{{- if .Capabilities.APIVersions.Has "cert-manager.io/v1" }}certManager{{ else }}helm{{ end -}}
{{- else -}}
{{- $m.tls.provider -}}
{{- end -}}
{{- end }}

{{/* The Secret of the metrics endpoint's certificate: metrics.tls.secretName, or the one the chart provides; empty for none. */}}
{{- define "lockwarden.metricsTLSSecret" -}}
{{- if .Values.metrics.tls.secretName -}}
{{- .Values.metrics.tls.secretName -}}
{{- else if include "lockwarden.metricsTLSProvider" . -}}
{{- include "lockwarden.fullname" . }}-metrics-tls
{{- end -}}
{{- end }}

{{/* The metrics Service's DNS name, which the certificate names and Prometheus checks. */}}
{{- define "lockwarden.metricsDNSName" -}}
{{- include "lockwarden.fullname" . }}-metrics.{{ .Release.Namespace }}.svc
{{- end }}

{{/* Where the pods mount the metrics certificate's Secret (--metrics-cert-path). */}}
{{- define "lockwarden.metricsCertPath" -}}
/etc/lockwarden/metrics-tls
{{- end }}

{{/*
The workload kinds the manager watches (--workload-kinds): Jobs always, then the optional ones.
*/}}
{{- define "lockwarden.workloadKinds" -}}
{{- $kinds := list "batch/v1/Job" -}}
{{- if .Values.workloads.tekton -}}
{{- $kinds = concat $kinds (list "tekton.dev/v1/PipelineRun" "tekton.dev/v1/TaskRun") -}}
{{- end -}}
{{- if .Values.workloads.argoWorkflows -}}
{{- $kinds = append $kinds "argoproj.io/v1alpha1/Workflow" -}}
{{- end -}}
{{- range .Values.workloads.extraKinds -}}
{{- $kinds = append $kinds (printf "%s/%s" .apiVersion .kind) -}}
{{- end -}}
{{- join "," $kinds -}}
{{- end -}}

{{/*
The manager's rules on the optional workload kinds (Jobs' are in the generated rules): read, and
patch for the kinds that wait suspended for a lock (PipelineRuns, Workflows).
*/}}
{{- define "lockwarden.rules.workloads" -}}
{{- if .Values.workloads.tekton }}
- apiGroups:
  - tekton.dev
  resources:
  - pipelineruns
  verbs:
  - list
  - patch
  - watch
- apiGroups:
  - tekton.dev
  resources:
  - taskruns
  verbs:
  - list
  - watch
{{- end }}
{{- if .Values.workloads.argoWorkflows }}
- apiGroups:
  - argoproj.io
  resources:
  - workflows
  verbs:
  - list
  - patch
  - watch
{{- end }}
{{- range .Values.workloads.extraKinds }}
- apiGroups:
  - {{ (regexFind "^.*/" .apiVersion | trimSuffix "/") | quote }}
  resources:
  - {{ .resource }}
  verbs:
  - list
  - watch
{{- end }}
{{- end -}}
