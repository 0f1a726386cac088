{{/* Names and labels. */}}
{{- define "csigw.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "csigw.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* csigw.selector: selector labels of one component; call with (list $ "node"). */}}
{{- define "csigw.selector" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ $.Chart.Name }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "csigw.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Which parts this release renders, from .Values.deployment. */}}
{{- define "csigw.check" -}}
{{- if not (has .Values.deployment (list "bridge" "central" "cluster" "tap")) -}}
{{- fail (printf "deployment: %q is not one of bridge, central, cluster, tap" .Values.deployment) -}}
{{- end -}}
{{- end -}}
{{- define "csigw.controller" -}}
{{- if or (eq .Values.deployment "bridge") (eq .Values.deployment "cluster") (and (eq .Values.deployment "tap") .Values.tap.controller.enabled) -}}true{{- end -}}
{{- end -}}
{{- define "csigw.node" -}}
{{- if or (eq .Values.deployment "bridge") (eq .Values.deployment "tap") -}}true{{- end -}}
{{- end -}}
{{- define "csigw.usesAppliance" -}}
{{- if or (eq .Values.deployment "bridge") (eq .Values.deployment "central") -}}true{{- end -}}
{{- end -}}

{{- define "csigw.applianceCredentialsSecret" -}}
{{ .Values.appliance.credentials.existingSecret | default (printf "%s-appliance-credentials" (include "csigw.fullname" .)) }}
{{- end -}}
{{- define "csigw.applianceTLSSecret" -}}
{{ .Values.appliance.tls.existingSecret | default (printf "%s-appliance-tls" (include "csigw.fullname" .)) }}
{{- end -}}
{{- define "csigw.hasApplianceCA" -}}
{{- if or .Values.appliance.tls.existingSecret .Values.appliance.tls.ca -}}true{{- end -}}
{{- end -}}
{{- define "csigw.hasApplianceToken" -}}
{{- if or .Values.appliance.credentials.existingSecret .Values.appliance.credentials.token -}}true{{- end -}}
{{- end -}}
{{- define "csigw.centralTLSSecret" -}}
{{ .Values.central.tls.existingSecret | default (printf "%s-central-tls" (include "csigw.fullname" .)) }}
{{- end -}}
{{/* The central gateway's ledger: "true" when it is on bbolt (one replica) or on etcd. */}}
{{- define "csigw.centralBbolt" -}}
{{- if and .Values.central.tenancy.enabled (eq .Values.central.tenancy.store "bbolt") -}}true{{- end -}}
{{- end -}}
{{- define "csigw.centralEtcd" -}}
{{- if and .Values.central.tenancy.enabled (eq .Values.central.tenancy.store "etcd") -}}true{{- end -}}
{{- end -}}
{{- define "csigw.clusterTLSSecret" -}}
{{ .Values.cluster.tls.existingSecret | default (printf "%s-central-client-tls" (include "csigw.fullname" .)) }}
{{- end -}}

{{/* The appliance backend (rest), as a dict. */}}
{{- define "csigw.applianceBackend" -}}
type: rest
urls: {{ toJson .Values.appliance.urls }}
retry: {{ toJson .Values.appliance.retry }}
{{- if include "csigw.hasApplianceCA" . }}
tls: {ca: /etc/csi-gateway/appliance-tls/ca.crt}
{{- end }}
{{- if include "csigw.hasApplianceToken" . }}
auth: {bearerTokenFile: /etc/csi-gateway/appliance-credentials/token}
{{- end }}
{{- end -}}

{{/* csigw.config: a gateway's configuration file; call with (list $ "controller"|"node"|"central"). */}}
{{- define "csigw.config" -}}
{{- $ := index . 0 -}}
{{- $role := index . 1 -}}
{{- $v := $.Values -}}
{{- $tap := eq $v.deployment "tap" -}}
{{- $cfg := dict -}}
{{- $admin := dict "listen" (printf "0.0.0.0:%v" (ternary $v.tap.adminPort $v.gateway.adminPort $tap)) "driverName" $v.driverName -}}
{{- $_ := set $cfg "admin" $admin -}}
{{- $_ := set $cfg "logging" (deepCopy $v.gateway.logging) -}}
{{- $_ := set $cfg "shutdown" (dict "grace" $v.gateway.shutdownGrace) -}}
{{- $_ := set $cfg "validation" (ternary $v.tap.validation $v.gateway.validation $tap) -}}
{{- if eq $role "central" -}}
{{- $tls := dict "cert" "/etc/csi-gateway/tls/tls.crt" "key" "/etc/csi-gateway/tls/tls.key" "clientCA" "/etc/csi-gateway/tls/ca.crt" -}}
{{- $clients := list -}}
{{- range $v.central.clients -}}
{{- $c := deepCopy . -}}
{{- if not $v.central.tenancy.enabled }}{{ $_ := unset $c "tenant" }}{{ end -}}
{{- $clients = append $clients $c -}}
{{- end -}}
{{- $lis := dict "endpoint" (printf "tcp://0.0.0.0:%v" $v.central.port) "tls" $tls "clients" $clients -}}
{{- with $v.central.methods }}{{ $_ := set $lis "methods" . }}{{ end -}}
{{- $_ := set $cfg "listeners" (list $lis) -}}
{{- if $v.central.tenancy.enabled -}}
{{- $ten := dict "tenants" $v.central.tenancy.tenants -}}
{{- if include "csigw.centralEtcd" $ -}}
{{- $e := $v.central.tenancy.etcd -}}
{{- $etls := dict "ca" "/etc/csi-gateway/etcd-tls/ca.crt" "cert" "/etc/csi-gateway/etcd-tls/tls.crt" "key" "/etc/csi-gateway/etcd-tls/tls.key" -}}
{{- with $e.serverName }}{{ $_ := set $etls "serverName" . }}{{ end -}}
{{- $_ := set $ten "store" (dict "etcd" (dict "endpoints" $e.endpoints "tls" $etls "prefix" $e.prefix "leaseTTL" $e.leaseTTL "requestTimeout" $e.requestTimeout)) -}}
{{- else -}}
{{- $_ := set $ten "store" (dict "bbolt" (dict "path" "/var/lib/csi-gateway/tenancy.db")) -}}
{{- end -}}
{{- if $v.central.tenancy.tokenKey.existingSecret -}}
{{- $_ := set $ten "tokenKeyFile" "/etc/csi-gateway/token-key/token.key" -}}
{{- end -}}
{{- $_ := set $cfg "tenancy" $ten -}}
{{- end -}}
{{- else -}}
{{- $mode := ternary "0600" "0660" (eq $role "node") -}}
{{- $_ := set $cfg "listeners" (list (dict "endpoint" "unix:///csi/csi.sock" "socketMode" $mode)) -}}
{{- end -}}
{{- $backends := dict -}}
{{- $routes := list -}}
{{- if $tap -}}
{{- $_ := set $backends "driver" (dict "type" "grpc" "target" "unix:///tap-driver/csi.sock") -}}
{{- $routes = append $routes (dict "methods" (list "*") "backend" "driver") -}}
{{- else if eq $v.deployment "cluster" -}}
{{- $tls := dict "ca" "/etc/csi-gateway/central-tls/ca.crt" "cert" "/etc/csi-gateway/central-tls/tls.crt" "key" "/etc/csi-gateway/central-tls/tls.key" -}}
{{- if $v.cluster.central.serverName }}{{ $_ := set $tls "serverName" $v.cluster.central.serverName }}{{ end -}}
{{- $central := dict "type" "grpc" "tls" $tls -}}
{{- if $v.cluster.central.targets }}{{ $_ := set $central "targets" $v.cluster.central.targets }}{{ else }}{{ $_ := set $central "target" $v.cluster.central.target }}{{ end -}}
{{- $_ := set $backends "central" $central -}}
{{- $routes = append $routes (dict "methods" (list "*") "backend" "central") -}}
{{- else -}}
{{- $_ := set $backends "appliance" (fromYaml (include "csigw.applianceBackend" $)) -}}
{{- if and (eq $role "node") (ne $v.node.nodeBackend "appliance") -}}
{{- $_ := set $backends "node" (dict "type" "grpc" "target" $v.node.nodeBackend) -}}
{{- $routes = append $routes (dict "methods" (list "/csi.v1.Node/*") "backend" "node") -}}
{{- end -}}
{{- $routes = append $routes (dict "methods" (list "*") "backend" "appliance") -}}
{{- end -}}
{{- $_ := set $cfg "backends" $backends -}}
{{- $_ := set $cfg "routes" $routes -}}
{{- toYaml (mergeOverwrite $cfg (deepCopy $v.gateway.extraConfig)) -}}
{{- end -}}

{{/* The gateway container's restricted security context (no mounts). */}}
{{- define "csigw.restricted" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end -}}

{{/* The admin port's probes. */}}
{{- define "csigw.probes" -}}
livenessProbe:
  httpGet: {path: /healthz, port: admin}
  periodSeconds: 10
  failureThreshold: 5
{{- end -}}
