package app

import (
	"encoding/base64"
	"encoding/pem"
	"net/http/httptest"
	"strings"
	"testing"
)

// upstreamFlag is one flag of prometheus-adapter v0.12.0's adapter command
// (sigs.k8s.io/prometheus-adapter/cmd/adapter: its own flags,
// custom-metrics-apiserver v1.30.0's AdapterBase, k8s.io/apiserver v0.30.0's
// secure serving, authentication, authorization, audit and feature options,
// component-base v0.30.0's logs.AddFlags), as its --help lists them.
type upstreamFlag struct {
	name string
	// typ is the pflag type upstream has; "" skips the type check (the
	// klog flags, whose Go flag types pflag names differently).
	typ string
	// value is a valid value for the flag; "" means a bool flag given
	// without a value. {file}, {kubeconfig} and {promkubeconfig} are
	// replaced with paths of files the test writes.
	value string
	// insteadOf is empty for flags that work with the same meaning, else
	// the Tidal flag or text the refusal must name.
	insteadOf string
}

var prometheusAdapterV012Flags = []upstreamFlag{
	// cmd/adapter/adapter.go
	{name: "prometheus-url", typ: "string", value: "http://prometheus.monitoring.svc:9090"},
	{name: "prometheus-auth-incluster", typ: "bool"},
	{name: "prometheus-auth-config", typ: "string", value: "{promkubeconfig}"},
	{name: "prometheus-ca-file", typ: "string", value: "{file}"},
	{name: "prometheus-client-tls-cert-file", typ: "string", value: "{file} --prometheus-client-tls-key-file={file}"},
	{name: "prometheus-client-tls-key-file", typ: "string", value: "{file} --prometheus-client-tls-cert-file={file}"},
	{name: "prometheus-token-file", typ: "string", value: "{file}"},
	{name: "prometheus-header", typ: "stringArray", value: "X-Scope-OrgID=tenant-a"},
	{name: "prometheus-verb", typ: "string", value: "POST"},
	{name: "config", typ: "string", value: "{file}"},
	{name: "metrics-relist-interval", typ: "duration", value: "30s"},
	{name: "metrics-max-age", typ: "duration", value: "5m"},
	{name: "disable-http2", typ: "bool"},
	// custom-metrics-apiserver's AdapterBase
	{name: "lister-kubeconfig", typ: "string", value: "{kubeconfig}"},
	{name: "discovery-interval", typ: "duration", value: "10m", insteadOf: "rereads API discovery"},
	{name: "client-qps", typ: "float32", value: "20"},
	{name: "client-burst", typ: "int", value: "40"},
	// secure serving
	{name: "bind-address", typ: "ip", value: "0.0.0.0"},
	{name: "secure-port", typ: "int", value: "6443"},
	{name: "cert-dir", typ: "string", value: "/tmp/certs"},
	{name: "tls-cert-file", typ: "string", value: "{file} --tls-private-key-file={file}"},
	{name: "tls-private-key-file", typ: "string", value: "{file} --tls-cert-file={file}"},
	{name: "tls-cipher-suites", typ: "stringSlice", value: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
	{name: "tls-min-version", typ: "string", value: "VersionTLS12"},
	{name: "tls-sni-cert-key", typ: "namedCertKey", value: "{file},{file}"},
	{name: "http2-max-streams-per-connection", typ: "int", value: "100"},
	{name: "permit-port-sharing", typ: "bool"},
	{name: "permit-address-sharing", typ: "bool"},
	// authentication
	{name: "requestheader-username-headers", typ: "stringSlice", value: "X-Remote-User"},
	{name: "requestheader-group-headers", typ: "stringSlice", value: "X-Remote-Group"},
	{name: "requestheader-extra-headers-prefix", typ: "stringSlice", value: "X-Remote-Extra-"},
	{name: "requestheader-client-ca-file", typ: "string", value: "{file}"},
	{name: "requestheader-allowed-names", typ: "stringSlice", value: "front-proxy-client"},
	{name: "client-ca-file", typ: "string", value: "{file}"},
	{name: "authentication-kubeconfig", typ: "string", value: "{kubeconfig}"},
	{name: "authentication-token-webhook-cache-ttl", typ: "duration", value: "10s"},
	{name: "authentication-skip-lookup", typ: "bool"},
	{name: "authentication-tolerate-lookup-failure", typ: "bool"},
	// authorization
	{name: "authorization-kubeconfig", typ: "string", value: "{kubeconfig}"},
	{name: "authorization-webhook-cache-authorized-ttl", typ: "duration", value: "10s"},
	{name: "authorization-webhook-cache-unauthorized-ttl", typ: "duration", value: "10s"},
	{name: "authorization-always-allow-paths", typ: "stringSlice", value: "/healthz,/readyz,/livez"},
	// audit
	{name: "audit-policy-file", typ: "string", value: "{file}"},
	{name: "audit-log-path", typ: "string", value: "-"},
	{name: "audit-log-maxage", typ: "int", value: "30"},
	{name: "audit-log-maxbackup", typ: "int", value: "10"},
	{name: "audit-log-maxsize", typ: "int", value: "100"},
	{name: "audit-log-format", typ: "string", value: "json"},
	{name: "audit-log-version", typ: "string", value: "audit.k8s.io/v1"},
	{name: "audit-log-compress", typ: "bool"},
	{name: "audit-log-mode", typ: "string", value: "blocking"},
	{name: "audit-log-batch-buffer-size", typ: "int", value: "10000"},
	{name: "audit-log-batch-max-size", typ: "int", value: "1"},
	{name: "audit-log-batch-max-wait", typ: "duration", value: "1s"},
	{name: "audit-log-batch-throttle-enable", typ: "bool"},
	{name: "audit-log-batch-throttle-qps", typ: "float32", value: "10"},
	{name: "audit-log-batch-throttle-burst", typ: "int", value: "15"},
	{name: "audit-log-truncate-enabled", typ: "bool"},
	{name: "audit-log-truncate-max-batch-size", typ: "int64", value: "10485760"},
	{name: "audit-log-truncate-max-event-size", typ: "int64", value: "102400"},
	{name: "audit-webhook-config-file", typ: "string", value: "{kubeconfig}"},
	{name: "audit-webhook-initial-backoff", typ: "duration", value: "10s"},
	// Deprecated and hidden upstream, still accepted by both.
	{name: "audit-webhook-batch-initial-backoff", typ: "duration", value: "10s"},
	{name: "audit-webhook-version", typ: "string", value: "audit.k8s.io/v1"},
	{name: "audit-webhook-mode", typ: "string", value: "batch"},
	{name: "audit-webhook-batch-buffer-size", typ: "int", value: "10000"},
	{name: "audit-webhook-batch-max-size", typ: "int", value: "400"},
	{name: "audit-webhook-batch-max-wait", typ: "duration", value: "30s"},
	{name: "audit-webhook-batch-throttle-enable", typ: "bool"},
	{name: "audit-webhook-batch-throttle-qps", typ: "float32", value: "10"},
	{name: "audit-webhook-batch-throttle-burst", typ: "int", value: "15"},
	{name: "audit-webhook-truncate-enabled", typ: "bool"},
	{name: "audit-webhook-truncate-max-batch-size", typ: "int64", value: "10485760"},
	{name: "audit-webhook-truncate-max-event-size", typ: "int64", value: "102400"},
	// features
	{name: "profiling", typ: "bool"},
	{name: "contention-profiling", typ: "bool"},
	{name: "debug-socket-path", typ: "string", value: "/tmp/debug.sock"},
	{name: "enable-priority-and-fairness", typ: "bool"},
	// logs
	{name: "v", value: "4"},
	{name: "vmodule", value: "provider=5"},
	{name: "log-flush-frequency", typ: "duration", value: "5s"},
}

const testKubeconfig = `apiVersion: v1
kind: Config
current-context: c
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
users:
- name: u
  user:
    token: t
contexts:
- name: c
  context:
    cluster: c
    user: u
`

// TestPrometheusAdapterFlags checks every flag of prometheus-adapter
// v0.12.0's adapter command against `tidal adapter`: it parses, has
// upstream's type, and validates, or it stops the start with an error that
// says what to use instead.
func TestPrometheusAdapterFlags(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "f", "x")
	kube := writeFile(t, dir, "kubeconfig", testKubeconfig)
	promKube := writeFile(t, dir, "prom-kubeconfig", strings.Replace(testKubeconfig, "    server: https://127.0.0.1:6443",
		"    server: https://prometheus.monitoring.svc:9090\n    certificate-authority-data: "+base64.StdEncoding.EncodeToString([]byte("CA")), 1))
	expand := func(s string) string {
		return strings.NewReplacer("{file}", file, "{kubeconfig}", kube, "{promkubeconfig}", promKube).Replace(s)
	}

	seen := map[string]bool{}
	for _, f := range prometheusAdapterV012Flags {
		t.Run(f.name, func(t *testing.T) {
			if seen[f.name] {
				t.Fatalf("listed twice")
			}
			seen[f.name] = true

			fs := NewOptions().Flags()
			var found bool
			for _, set := range fs.FlagSets {
				if got := set.Lookup(f.name); got != nil {
					found = true
					if f.typ != "" && got.Value.Type() != f.typ {
						t.Errorf("type %s, upstream has %s", got.Value.Type(), f.typ)
					}
				}
			}
			if !found {
				t.Fatalf("tidal adapter has no --%s: a prometheus-adapter deployment using it would not start", f.name)
			}

			args := []string{"--prometheus-url=http://prometheus:9090"}
			if f.value == "" {
				args = append(args, "--"+f.name)
			} else {
				args = append(args, strings.Fields("--"+f.name+"="+expand(f.value))...)
			}
			errs := parse(t, args...).Validate()
			var msgs []string
			for _, err := range errs {
				msgs = append(msgs, err.Error())
			}
			all := strings.Join(msgs, "\n")
			if f.insteadOf == "" {
				if len(errs) > 0 {
					t.Errorf("%q does not validate:\n%s", args, all)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(all, "--"+f.name) || !strings.Contains(all, f.insteadOf) {
				t.Errorf("%q: want one error naming --%s and %q, got:\n%s", args, f.name, f.insteadOf, all)
			}
		})
	}
}

// TestPrometheusAdapterFlagMeanings checks that the flags prometheus-adapter
// users know land where they did there.
func TestPrometheusAdapterFlagMeanings(t *testing.T) {
	dir := t.TempDir()
	kube := writeFile(t, dir, "kubeconfig", testKubeconfig)
	ts := httptest.NewTLSServer(nil)
	ts.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	promKube := writeFile(t, dir, "prom-kubeconfig", strings.Replace(testKubeconfig, "    server: https://127.0.0.1:6443",
		"    server: https://prometheus.monitoring.svc:9090\n    certificate-authority-data: "+base64.StdEncoding.EncodeToString(ca), 1))

	o := parse(t, "--prometheus-url=https://prometheus.monitoring.svc:9090", "--prometheus-auth-config="+promKube,
		"--lister-kubeconfig="+kube, "--disable-http2", "--client-qps=20", "--client-burst=40",
		"--metrics-relist-interval=30s", "--prometheus-header=X-Scope-OrgID=a")
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatalf("validate: %v", errs)
	}
	if o.Kubeconfig != "" || o.ListerKubeconfig != kube {
		t.Errorf("--lister-kubeconfig: kubeconfig %q, lister %q; want only the lister's set, so authn and authz stay in-cluster", o.Kubeconfig, o.ListerKubeconfig)
	}
	if !o.SecureServing.DisableHTTP2Serving {
		t.Error("--disable-http2 did not disable HTTP/2 serving")
	}
	if o.ClientQPS != 20 || o.ClientBurst != 40 {
		t.Errorf("client qps %v burst %d", o.ClientQPS, o.ClientBurst)
	}
	if o.Prometheus.AuthKubeconfig != promKube || o.Prometheus.HTTPConfigFile != "" {
		t.Errorf("--prometheus-auth-config set %+v; want the kubeconfig auth, not the http_config file", o.Prometheus)
	}
	if _, err := o.Prometheus.Config(); err != nil {
		t.Errorf("a kubeconfig with a CA and a token does not make a Prometheus client: %v", err)
	}

	if errs := parse(t, "--prometheus-url=http://p:9090", "--kubeconfig="+kube, "--lister-kubeconfig="+kube).Validate(); len(errs) != 1 ||
		!strings.Contains(errs[0].Error(), "--kubeconfig and --lister-kubeconfig") {
		t.Errorf("both kubeconfigs: %v", errs)
	}
}
