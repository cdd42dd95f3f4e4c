{{/* On every object: the labels deploy/ sets, and Helm's. */}}
{{- define "dbi.labels" -}}
app.kubernetes.io/part-of: dbi
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "dbi.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* A subject: one of the release's ServiceAccounts. */}}
{{- define "dbi.subject" -}}
subjects:
  - kind: ServiceAccount
    name: {{ .account }}
    namespace: {{ .namespace }}
{{- end }}

{{/* The container settings every dbi container has. */}}
{{- define "dbi.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
{{- end }}

{{- define "dbi.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{/* The Temporal client's Secret-backed settings: its TLS files and API key. */}}
{{- define "dbi.temporalEnv" -}}
{{- with .Values.temporal.apiKeySecret }}{{ if .name -}}
- name: TEMPORAL_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .name }}
      key: {{ .key }}
{{- end }}{{ end }}
{{- end }}

{{- define "dbi.temporalMount" -}}
{{- if .Values.temporal.tls.secretName -}}
- name: temporal-tls
  mountPath: /etc/temporal-tls
  readOnly: true
{{- end }}
{{- end }}

{{- define "dbi.temporalVolume" -}}
{{- if .Values.temporal.tls.secretName -}}
- name: temporal-tls
  secret:
    secretName: {{ .Values.temporal.tls.secretName }}
{{- end }}
{{- end }}

{{/* Pods roll when the Temporal settings change. */}}
{{- define "dbi.checksum" -}}
checksum/temporal: {{ include (print .Template.BasePath "/temporal.yaml") . | sha256sum }}
{{- end }}
