{{/* The release's names. The release name graceful-drain gives the names deploy/ uses. */}}
{{- define "graceful-drain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "graceful-drain.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A Service name is a DNS label (at most 63 characters): the full name is cut to 55 so
"-webhook" fits. Every name that fitted before is unchanged. */}}
{{- define "graceful-drain.serviceName" -}}{{ include "graceful-drain.fullname" . | trunc 55 | trimSuffix "-" }}-webhook{{- end -}}
{{- define "graceful-drain.tlsSecretName" -}}
{{- if eq .Values.tls.mode "secret" -}}{{ .Values.tls.secret.name }}{{- else -}}{{ include "graceful-drain.fullname" . }}-webhook-tls{{- end -}}
{{- end -}}
{{- define "graceful-drain.leaseName" -}}{{ default (include "graceful-drain.fullname" .) .Values.leaderElection.leaseName }}{{- end -}}
{{- define "graceful-drain.serviceAccountName" -}}{{ default (include "graceful-drain.fullname" .) .Values.serviceAccount.name }}{{- end -}}
{{- define "graceful-drain.priorityClassName" -}}{{ default (printf "%s-critical" (include "graceful-drain.fullname" .)) .Values.priorityClass.name }}{{- end -}}

{{- define "graceful-drain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "graceful-drain.name" . }}
app.kubernetes.io/component: controller
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "graceful-drain.labels" -}}
{{ include "graceful-drain.selectorLabels" . }}
app.kubernetes.io/part-of: graceful-drain
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata.annotations: the object's own (they win), then commonAnnotations; nothing when
both are empty. Called with (dict "context" $ "own" MAP). */}}
{{- define "graceful-drain.annotations" -}}
{{- $annotations := merge (dict) (.own | default dict) .context.Values.commonAnnotations -}}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* topologySpreadConstraints, each without a labelSelector given the pods' own. */}}
{{- define "graceful-drain.topologySpreadConstraints" -}}
{{- range .Values.topologySpreadConstraints }}
{{- $constraint := . }}
{{- if not (hasKey . "labelSelector") }}
{{- $constraint = merge (dict "labelSelector" (dict "matchLabels" (include "graceful-drain.selectorLabels" $ | fromYaml))) . }}
{{- end }}
- {{ toYaml $constraint | nindent 2 | trim }}
{{- end }}
{{- end -}}

{{/* The namespaces the webhook is asked about: the same list the controller watches. */}}
{{- define "graceful-drain.namespaceSelector" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
{{- if .Values.namespaces }}
    operator: In
    values: {{ toJson .Values.namespaces }}
{{- else }}
    operator: NotIn
    values: {{ toJson (uniq (append .Values.excludedNamespaces .Release.Namespace)) }}
{{- end }}
{{- end -}}

{{/* Refuse values that cannot work, with a message naming the value. */}}
{{- define "graceful-drain.validate" -}}
{{- if and (eq .Values.tls.mode "secret") (not .Values.tls.secret.name) -}}
{{- fail "tls.mode=secret needs tls.secret.name (an existing kubernetes.io/tls Secret)" -}}
{{- end -}}
{{- if and (eq .Values.tls.mode "secret") (not .Values.tls.secret.caBundle) -}}
{{- fail "tls.mode=secret needs tls.secret.caBundle (the base64 PEM CA that verifies the Secret's certificate)" -}}
{{- end -}}
{{- if and .Values.tls.selfSigned.extraHosts (ne .Values.tls.mode "self-signed") -}}
{{- fail "tls.selfSigned.extraHosts only applies with tls.mode=self-signed" -}}
{{- end -}}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) -}}
{{- fail "serviceAccount.create=false needs serviceAccount.name (an existing ServiceAccount in the release namespace)" -}}
{{- end -}}
{{- if has .Release.Namespace .Values.namespaces -}}
{{- fail (printf "namespaces must not list the release namespace %s: the controller never protects its own pods" .Release.Namespace) -}}
{{- end -}}
{{- end -}}
