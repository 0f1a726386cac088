package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// mockDriverEnv names csi-test's mock driver binary (make test builds csi-test v4.1.0's with
// test/orchestrators/build-components.sh mock-driver and sets it).
const mockDriverEnv = "CSIGWTEST_MOCK_DRIVER"

// TestMockDriverSanity runs csi-sanity against csi-test's mock driver directly, then through
// the real gateway binary as a tap (a grpc backend, validation: warn, as docs/tap.md deploys
// it) under each repair setting. Every run has the counts of the direct one, and call by call
// the code csi-sanity got equals the code the mock driver logged for the same call, except the
// repairs docs/tap.md lists for the setting (repairedCode).
func TestMockDriverSanity(t *testing.T) {
	bin := os.Getenv(mockDriverEnv)
	if bin == "" {
		t.Skipf("SKIPPED, NEEDS CSI-TEST'S MOCK DRIVER: $%s is not set. make test builds it and sets it; by hand: "+
			"test/orchestrators/build-components.sh mock-driver && export %s=$(test/orchestrators/build-components.sh --path mock-driver)",
			mockDriverEnv, mockDriverEnv)
	}
	settings := []string{"direct", "plugin", "spec", "none"}
	summaries := testutil.SanityVariants(t, settings, func(t *testing.T, setting string) {
		dir := t.TempDir()
		mockEndpoint := "unix://" + filepath.Join(dir, "mock.sock")
		mock := testutil.StartCommand(t, "env", "CSI_ENDPOINT="+mockEndpoint, bin, "-v=5")
		testutil.Dial(t, mockEndpoint)

		address := mockEndpoint
		var gw *gatewayProc
		if setting != "direct" {
			gw = startGatewayWith(t, dir, fmt.Sprintf(`backends:
  mock: {type: grpc, target: %q, repair: %s}
routes:
  - {methods: ["*"], backend: mock}
validation: warn
`, mockEndpoint, setting))
			address = gw.Endpoint
		}

		var caller callerCodes
		cfg := sanity.NewTestConfig()
		cfg.Address = address
		cfg.TargetPath = filepath.Join(dir, "target")
		cfg.StagingPath = filepath.Join(dir, "staging")
		cfg.TestNodeVolumeAttachLimit = true
		record := grpc.WithChainUnaryInterceptor(caller.record)
		cfg.DialOptions = append(cfg.DialOptions, record)
		cfg.ControllerDialOptions = append(cfg.ControllerDialOptions, record)
		testutil.RunSanity(t, cfg)

		calls := caller.calls()
		driverCodes := compareCallByCall(t, setting, calls, mockDriverCalls(t, mock.Output()))
		if gw != nil {
			checkGatewayCallLog(t, gw.Output(), calls, driverCodes)
		}
	})
	if summaries == nil {
		return // the child
	}
	for _, setting := range settings[1:] {
		if got, want := countsOf(summaries[setting]), countsOf(summaries["direct"]); got != want {
			t.Errorf("csi-sanity through the gateway (repair: %s): %s; direct: %s", setting, got, want)
		}
	}
}

// codedCall is one unary call and the status code it ended with.
type codedCall struct{ Method, Code string }

// callerCodes records, in order, the code of every call csi-sanity makes.
type callerCodes struct {
	mu   sync.Mutex
	list []codedCall
}

func (c *callerCodes) record(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	c.mu.Lock()
	c.list = append(c.list, codedCall{method, status.Code(err).String()})
	c.mu.Unlock()
	return err
}

func (c *callerCodes) calls() []codedCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]codedCall(nil), c.list...)
}

// mockCodeInError is how the mock driver's log writes a status: err.Error() of a gRPC status.
var mockCodeInError = regexp.MustCompile(`^rpc error: code = (\w+) desc = `)

// mockDriverCalls parses the mock driver's log (at -v=3 and above it logs every call as
// `gRPCCall: {"Method":...,"Error":...}`) into the calls it answered, in order.
func mockDriverCalls(t *testing.T, log string) []codedCall {
	t.Helper()
	var out []codedCall
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		_, js, ok := strings.Cut(sc.Text(), "gRPCCall: ")
		if !ok {
			continue
		}
		var entry struct{ Method, Error string }
		if err := json.Unmarshal([]byte(js), &entry); err != nil {
			t.Fatalf("the mock driver's call log line is not JSON: %v\n%s", err, sc.Text())
		}
		code := "OK"
		if entry.Error != "" {
			m := mockCodeInError.FindStringSubmatch(entry.Error)
			if m == nil {
				t.Fatalf("the mock driver logged an error without a gRPC code: %q", entry.Error)
			}
			code = m[1]
		}
		out = append(out, codedCall{entry.Method, code})
	}
	if len(out) == 0 {
		t.Fatalf("the mock driver logged no call; its output:\n%s", log)
	}
	return out
}

// gatewayOwnCalls are the calls the gateway makes to a backend for itself (the driver's name,
// the capabilities validation needs, readiness): in the driver's log, not the caller's.
var gatewayOwnCalls = map[string]bool{
	"/csi.v1.Identity/GetPluginInfo":               true,
	"/csi.v1.Identity/GetPluginCapabilities":       true,
	"/csi.v1.Identity/Probe":                       true,
	"/csi.v1.Controller/ControllerGetCapabilities": true,
	"/csi.v1.Node/NodeGetCapabilities":             true,
}

// repairedCode is the code a caller gets for a driver's code on method under a repair setting
// ("direct": no gateway), as docs/tap.md's table says; the driver's own otherwise.
func repairedCode(setting, method, code string) string {
	_, rpc, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	deletes := map[string]bool{"DeleteVolume": true, "DeleteSnapshot": true, "DeleteVolumeGroupSnapshot": true, "DeleteVolumeGroup": true}
	unpublishes := map[string]bool{"ControllerUnpublishVolume": true, "NodeUnpublishVolume": true, "NodeUnstageVolume": true}
	switch {
	case setting == "direct" || setting == "none":
	case code == "NotFound" && deletes[rpc]:
		return "OK"
	case setting == "spec":
	case code == "NotFound" && unpublishes[rpc]:
		return "OK"
	case rpc == "Probe" && (code == "Unavailable" || code == "DeadlineExceeded"):
		return "FailedPrecondition"
	case code == "Unknown" || code == "DataLoss":
		return "Internal"
	}
	return code
}

// compareCallByCall pairs each of the caller's calls, in order, with the driver's next call of
// the same method (passing over calls csi-sanity did not make: the test's readiness Probe, the
// gateway's own) and checks the caller's code is the driver's, repaired as the setting says.
// It logs how many calls each repair changed and returns the driver's code for each of the
// caller's calls.
func compareCallByCall(t *testing.T, setting string, caller, driver []codedCall) []string {
	t.Helper()
	repaired := map[string]int{}
	own := 0
	j := 0
	driverCodes := make([]string, 0, len(caller))
	for i, c := range caller {
		for j < len(driver) && driver[j].Method != c.Method && gatewayOwnCalls[driver[j].Method] {
			own++
			j++
		}
		if j == len(driver) || driver[j].Method != c.Method {
			next := "nothing more"
			if j < len(driver) {
				next = fmt.Sprintf("%+v", driver[j])
			}
			t.Fatalf("call %d of %d, %s, did not reach the driver in order: the driver's next logged call is %s", i+1, len(caller), c.Method, next)
		}
		d := driver[j]
		j++
		driverCodes = append(driverCodes, d.Code)
		if want := repairedCode(setting, d.Method, d.Code); c.Code != want {
			t.Errorf("call %d, %s: the driver answered %s, the caller got %s, want %s (repair: %s)", i+1, c.Method, d.Code, c.Code, want, setting)
		}
		if c.Code != d.Code {
			repaired[fmt.Sprintf("%s %s→%s", c.Method, d.Code, c.Code)]++
		}
	}
	for ; j < len(driver); j++ {
		if !gatewayOwnCalls[driver[j].Method] {
			t.Errorf("the driver logged %+v after the caller's last call", driver[j])
		}
		own++
	}
	t.Logf("repair %s: %d calls compared, %d other calls to the driver, repaired: %v", setting, len(caller), own, repaired)
	return driverCodes
}

// checkGatewayCallLog checks the gateway's call log lines against what the caller got and the
// driver answered: one line per call, in order (csi-sanity makes one call at a time), with the
// caller's code as `code` and, where it differs, the driver's as `backend_code`, with the
// repair kinds in `repairs`.
func checkGatewayCallLog(t *testing.T, log string, caller []codedCall, driverCodes []string) {
	t.Helper()
	type line struct {
		Msg, Method, Code, Repairs string
		BackendCode                string `json:"backend_code"`
	}
	var lines []line
	for _, l := range strings.Split(log, "\n") {
		var ln line
		if json.Unmarshal([]byte(l), &ln) == nil && ln.Msg == "call" {
			lines = append(lines, ln)
		}
	}
	if len(lines) != len(caller) {
		t.Fatalf("the gateway logged %d calls, csi-sanity made %d", len(lines), len(caller))
	}
	for i, ln := range lines {
		c := caller[i]
		backendCode := ln.Code
		if ln.BackendCode != "" {
			backendCode = ln.BackendCode
			if ln.BackendCode != ln.Code && !strings.Contains(ln.Repairs, "code") {
				t.Errorf("call %d, %s: logged backend_code %s beside code %s, but repairs %q has no code", i+1, c.Method, ln.BackendCode, ln.Code, ln.Repairs)
			}
		}
		if !strings.HasSuffix(c.Method, "/"+ln.Method) || ln.Code != c.Code || backendCode != driverCodes[i] {
			t.Errorf("call %d: the gateway logged %s code %s backend_code %q; the caller got %s for %s, the driver answered %s",
				i+1, ln.Method, ln.Code, ln.BackendCode, c.Code, c.Method, driverCodes[i])
		}
	}
}

// sanityCounts matches Ginkgo's counts in a suite's summary.
var sanityCounts = regexp.MustCompile(`Ran (\d+) of (\d+) Specs.*?(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped`)

// countsOf is a summary's counts, or the summary itself when it has none.
func countsOf(summary string) string {
	m := sanityCounts.FindStringSubmatch(summary)
	if m == nil {
		return "no counts in " + summary
	}
	return fmt.Sprintf("ran %s of %s, %s passed, %s failed, %s pending, %s skipped", m[1], m[2], m[3], m[4], m[5], m[6])
}
