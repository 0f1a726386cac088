{{/* csigw.driverContainer: the tap's driver container, unchanged but for its socket directory,
     which moves to the pod-private emptyDir tap-driver-socket, and a livenessProbe on the
     livenessprobe sidecar when it has none. Call with (list $ container). */}}
{{- define "csigw.driverContainer" -}}
{{- $ := index . 0 -}}
{{- $c := deepCopy (index . 1) -}}
{{- if not $c.name }}{{ fail "tap.*.driverContainer: name and image are required" }}{{ end -}}
{{- $mounts := list -}}
{{- range ($c.volumeMounts | default list) -}}
{{- if ne .mountPath $.Values.tap.socketDir }}{{ $mounts = append $mounts . }}{{ end -}}
{{- end -}}
{{- $mounts = append $mounts (dict "name" "tap-driver-socket" "mountPath" $.Values.tap.socketDir) -}}
{{- $_ := set $c "volumeMounts" $mounts -}}
{{- if and $.Values.sidecars.livenessProbe.enabled (not $c.livenessProbe) -}}
{{- /* The livenessprobe sidecar's port, by number: a named port resolves in its own container only. */ -}}
{{- $_ := set $c "livenessProbe" (dict "httpGet" (dict "path" "/healthz" "port" $.Values.sidecars.livenessProbe.port) "periodSeconds" 10 "timeoutSeconds" 5 "failureThreshold" 5) -}}
{{- end -}}
{{- toYaml (list $c) -}}
{{- end -}}

{{/* csigw.gatewayContainer: the gateway container; call with (list $ role). */}}
{{- define "csigw.gatewayContainer" -}}
{{- $ := index . 0 -}}
{{- $role := index . 1 -}}
{{- $v := $.Values -}}
{{- $tap := eq $v.deployment "tap" -}}
- name: csi-gateway
  image: {{ include "csigw.image" $ }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  args: [serve, --config=/etc/csi-gateway/config/config.yaml]
  ports:
    - {name: admin, containerPort: {{ ternary $v.tap.adminPort $v.gateway.adminPort $tap }}}
    {{- if eq $role "central" }}
    - {name: csi-mtls, containerPort: {{ $v.central.port }}}
    {{- end }}
  {{- include "csigw.probes" $ | nindent 2 }}
  {{- if ne $role "node" }}
  readinessProbe:
    httpGet: {path: /readyz, port: admin}
    periodSeconds: {{ ternary 5 10 (eq $role "central") }}
  {{- end }}
  securityContext:
    {{- if and (eq $role "node") $v.node.privileged (not $tap) }}
    privileged: true      # the node backend mounts in this container: see node.privileged
    runAsUser: 0
    runAsNonRoot: false
    readOnlyRootFilesystem: true
    {{- else if eq $role "node" }}
    # uid 0 only so that node-driver-registrar (root, no capabilities) can connect to the
    # 0600 socket; the gateway mounts nothing here (its node backend does).
    runAsUser: 0
    runAsNonRoot: false
    {{- include "csigw.restricted" $ | nindent 4 }}
    {{- else if $tap }}
    # uid 0 to reach the driver's socket, which a root driver creates owner-only; group 65532
    # owns the gateway's socket, so the sidecars (65532) can connect. No capabilities.
    runAsUser: 0
    runAsGroup: 65532
    runAsNonRoot: false
    {{- include "csigw.restricted" $ | nindent 4 }}
    {{- else }}
    runAsUser: 65532
    runAsGroup: 65532
    runAsNonRoot: true
    {{- include "csigw.restricted" $ | nindent 4 }}
    {{- end }}
  resources:
    {{- toYaml (index $v $role).resources | nindent 4 }}
  volumeMounts:
    {{- if ne $role "central" }}
    - {name: socket-dir, mountPath: /csi}
    {{- end }}
    - {name: config, mountPath: /etc/csi-gateway/config, readOnly: true}
    {{- if $tap }}
    - {name: tap-driver-socket, mountPath: /tap-driver}
    {{- else if eq $v.deployment "cluster" }}
    - {name: central-tls, mountPath: /etc/csi-gateway/central-tls, readOnly: true}
    {{- else }}
    {{- if eq $role "central" }}
    - {name: tls, mountPath: /etc/csi-gateway/tls, readOnly: true}
    {{- if include "csigw.centralBbolt" $ }}
    - {name: ledger, mountPath: /var/lib/csi-gateway}
    {{- else if include "csigw.centralEtcd" $ }}
    - {name: etcd-tls, mountPath: /etc/csi-gateway/etcd-tls, readOnly: true}
    {{- end }}
    {{- if and $v.central.tenancy.enabled $v.central.tenancy.tokenKey.existingSecret }}
    - {name: token-key, mountPath: /etc/csi-gateway/token-key, readOnly: true}
    {{- end }}
    {{- end }}
    {{- if include "csigw.hasApplianceToken" $ }}
    - {name: appliance-credentials, mountPath: /etc/csi-gateway/appliance-credentials, readOnly: true}
    {{- end }}
    {{- if include "csigw.hasApplianceCA" $ }}
    - {name: appliance-tls, mountPath: /etc/csi-gateway/appliance-tls, readOnly: true}
    {{- end }}
    {{- if and (eq $role "node") $v.node.privileged (not $tap) }}
    - {name: kubelet-dir, mountPath: {{ $v.node.kubeletDir }}, mountPropagation: Bidirectional}
    - {name: dev, mountPath: /dev}
    {{- end }}
    {{- end }}
    {{- if and (eq $role "node") $v.node.extraVolumeMounts }}
    {{- toYaml $v.node.extraVolumeMounts | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* csigw.gatewayVolumes: the volumes the gateway container mounts; call with (list $ role). */}}
{{- define "csigw.gatewayVolumes" -}}
{{- $ := index . 0 -}}
{{- $role := index . 1 -}}
{{- $v := $.Values -}}
{{- $full := include "csigw.fullname" $ -}}
- name: config
  configMap: {name: {{ $full }}-{{ $role }}-config}
{{- if eq $v.deployment "tap" }}
- name: tap-driver-socket
  emptyDir: {}
{{- else if eq $v.deployment "cluster" }}
- name: central-tls
  secret: {secretName: {{ include "csigw.clusterTLSSecret" $ }}, defaultMode: 0440}
{{- else }}
{{- if eq $role "central" }}
- name: tls
  secret: {secretName: {{ include "csigw.centralTLSSecret" $ }}, defaultMode: 0440}
{{- if include "csigw.centralBbolt" $ }}
- name: ledger
  persistentVolumeClaim: {claimName: {{ $v.central.tenancy.ledger.existingClaim | default (printf "%s-central-ledger" $full) }}}
{{- else if include "csigw.centralEtcd" $ }}
- name: etcd-tls
  secret: {secretName: {{ $v.central.tenancy.etcd.existingSecret }}, defaultMode: 0440}
{{- end }}
{{- if and $v.central.tenancy.enabled $v.central.tenancy.tokenKey.existingSecret }}
- name: token-key
  secret: {secretName: {{ $v.central.tenancy.tokenKey.existingSecret }}, defaultMode: 0440, items: [{key: token.key, path: token.key}]}
{{- end }}
{{- end }}
{{- if include "csigw.hasApplianceToken" $ }}
- name: appliance-credentials
  secret: {secretName: {{ include "csigw.applianceCredentialsSecret" $ }}, defaultMode: 0440}
{{- end }}
{{- if include "csigw.hasApplianceCA" $ }}
- name: appliance-tls
  secret: {secretName: {{ include "csigw.applianceTLSSecret" $ }}, defaultMode: 0444}
{{- end }}
{{- end }}
{{- end -}}

{{/* csigw.sidecar: one CSI controller sidecar on /csi/csi.sock, electing a leader, its
     /healthz/leader-election on values.port checked by its livenessProbe; call with
     (list $ name values portName). */}}
{{- define "csigw.sidecar" -}}
{{- $ := index . 0 -}}
{{- $s := index . 2 -}}
- name: {{ index . 1 }}
  image: {{ $s.image }}
  args:
    - --csi-address=/csi/csi.sock
    - --leader-election
    - --timeout={{ $.Values.sidecars.timeout }}
    - --http-endpoint=:{{ $s.port }}
    {{- range ($s.extraArgs | default list) }}
    - {{ . }}
    {{- end }}
  ports:
    - {name: {{ index . 3 }}, containerPort: {{ $s.port }}}
  livenessProbe:
    httpGet: {path: /healthz/leader-election, port: {{ index . 3 }}}
    periodSeconds: 20
    timeoutSeconds: 10
    failureThreshold: 3
  securityContext:
    runAsUser: 65532
    runAsGroup: 65532
    runAsNonRoot: true
    {{- include "csigw.restricted" $ | nindent 4 }}
  resources:
    {{- toYaml $.Values.sidecars.resources | nindent 4 }}
  volumeMounts:
    - {name: socket-dir, mountPath: /csi}
{{- end -}}

{{/* csigw.driverLiveness: tap only, the livenessprobe sidecar on the tapped driver's own
     socket (the pod-private tap-driver-socket), not through the gateway. */}}
{{- define "csigw.driverLiveness" -}}
{{- $ := . -}}
{{- $p := $.Values.sidecars.livenessProbe -}}
- name: liveness-probe
  image: {{ $p.image }}
  args: [--csi-address=/tap-driver/csi.sock, "--http-endpoint=:{{ $p.port }}"]
  ports:
    - {name: driver-probe, containerPort: {{ $p.port }}}
  securityContext:
    {{- include "csigw.restricted" $ | nindent 4 }}
  resources:
    {{- toYaml $.Values.sidecars.resources | nindent 4 }}
  volumeMounts:
    - {name: tap-driver-socket, mountPath: /tap-driver}
{{- end -}}
