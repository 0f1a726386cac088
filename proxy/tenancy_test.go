package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/embedded"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
)

// tenantGateway is a gateway serving one backend to tenants, each through a Unix socket of
// its own (ListenerPolicy.Tenant), and a client connection to each.
type tenantGateway struct {
	srv   *Server
	conns map[string]*grpc.ClientConn
	stop  func() // shuts the gateway down; also at the end of the test
}

// startTenantGateway serves be to tenants through ledger, on transport tr.
func startTenantGateway(t *testing.T, tr Transport, be backends.Backend, ledger *tenancy.Ledger, tenants ...string) *tenantGateway {
	t.Helper()
	return startTenantGatewayWith(t, tenantGatewayOptions(tr, be, ledger), tenants...)
}

// tenantGatewayOptions are the options of a gateway serving be to tenants through ledger, on
// transport tr.
func tenantGatewayOptions(tr Transport, be backends.Backend, ledger *tenancy.Ledger) Options {
	return Options{
		Routes:   []Route{{Methods: []string{"*"}, Backend: "array"}},
		Backends: map[string]backends.Backend{"array": be},
		Log:      slog.New(slog.DiscardHandler), Tenancy: ledger, Transport: tr,
	}
}

// startTenantGatewayWith serves tenants with the options o.
func startTenantGatewayWith(t *testing.T, o Options, tenants ...string) *tenantGateway {
	t.Helper()
	srv, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	gw := &tenantGateway{srv: srv, conns: map[string]*grpc.ClientConn{}}
	dir := t.TempDir()
	for _, tenant := range tenants {
		sock := filepath.Join(dir, tenant+".sock")
		l, err := Listen(Endpoint{Scheme: "unix", Address: sock}, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(l, ListenerPolicy{Tenant: tenant})
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		gw.conns[tenant] = conn
	}
	var once sync.Once
	gw.stop = func() {
		once.Do(func() {
			for _, conn := range gw.conns {
				conn.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
		})
	}
	t.Cleanup(gw.stop)
	return gw
}

// controller returns a tenant's Controller client.
func (gw *tenantGateway) controller(tenant string) csi.ControllerClient {
	return csi.NewControllerClient(gw.conns[tenant])
}

// openLedger opens a ledger, closed at the end of the test (after the gateways using it).
func openLedger(t *testing.T, path string, quotas map[string]tenancy.Quota, opts ...tenancy.Option) *tenancy.Ledger {
	t.Helper()
	ledger, err := tenancy.Open(path, quotas, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ledger.Close() })
	return ledger
}

// usageOf returns a tenant's usage in ledger, failing the test when it cannot be read.
func usageOf(t *testing.T, ledger *tenancy.Ledger, tenant string) tenancy.Usage {
	t.Helper()
	usage, err := ledger.Usage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return usage[tenant]
}

// openEmbedded opens the reference appliance in a fresh directory, closed at the end of the
// test.
func openEmbedded(t *testing.T) *embedded.Backend {
	t.Helper()
	be, err := embedded.OpenBackend("appliance", embedded.Config{DataDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// metadataDriver streams two answers to GetMetadataAllocated and records the snapshot IDs
// it was asked about.
type metadataDriver struct {
	csi.UnimplementedSnapshotMetadataServer
	mu   sync.Mutex
	seen []string
}

func (d *metadataDriver) GetMetadataAllocated(req *csi.GetMetadataAllocatedRequest, s csi.SnapshotMetadata_GetMetadataAllocatedServer) error {
	d.mu.Lock()
	d.seen = append(d.seen, req.GetSnapshotId())
	d.mu.Unlock()
	for i := range 2 {
		if err := s.Send(&csi.GetMetadataAllocatedResponse{VolumeCapacityBytes: int64(i + 1)}); err != nil {
			return err
		}
	}
	return nil
}

// TestTenantStreamScoped: a tenant's server-streaming call (SnapshotMetadata) reaches the
// backend with the snapshot's backend ID and streams back unchanged; another tenant's (or an
// unknown) snapshot is NOT_FOUND and never reaches the backend.
func TestTenantStreamScoped(t *testing.T) { onEachTransport(t, testTenantStreamScoped) }

func testTenantStreamScoped(t *testing.T, tr Transport) {
	dir := t.TempDir()
	drv := &metadataDriver{}
	gs := grpc.NewServer()
	csi.RegisterSnapshotMetadataServer(gs, drv)
	dl, err := net.Listen("unix", filepath.Join(dir, "driver.sock"))
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(dl)
	defer gs.Stop()

	ledger := openLedger(t, filepath.Join(dir, "tenancy.db"), map[string]tenancy.Quota{"blue": {}, "green": {}})
	for snap, tenant := range map[string]string{"snap-blue": "blue", "snap-green": "green"} {
		if err := ledger.Record(t.Context(), tenancy.Snapshot, snap, tenancy.Record{Tenant: tenant}); err != nil {
			t.Fatal(err)
		}
	}
	gw := startTenantGateway(t, tr, newGRPCBackend(t, tr, dl.Addr().String(), nil, nil), ledger, "blue")
	client := csi.NewSnapshotMetadataClient(gw.conns["blue"])

	read := func(id string) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := client.GetMetadataAllocated(ctx, &csi.GetMetadataAllocatedRequest{SnapshotId: id})
		if err != nil {
			return 0, err
		}
		n := 0
		for {
			if _, err := s.Recv(); err == io.EOF {
				return n, nil
			} else if err != nil {
				return n, err
			}
			n++
		}
	}
	if n, err := read("blue.snap-blue"); err != nil || n != 2 {
		t.Fatalf("blue's own snapshot: %d answers, %v; want 2", n, err)
	}
	for _, id := range []string{"blue.snap-green", "green.snap-green", "snap-green", "blue.snap-none"} {
		if _, err := read(id); status.Code(err) != codes.NotFound {
			t.Errorf("snapshot %q: %v, want NOT_FOUND", id, err)
		}
	}
	drv.mu.Lock()
	defer drv.mu.Unlock()
	if len(drv.seen) != 1 || drv.seen[0] != "snap-blue" {
		t.Errorf("the backend was asked about %v, want only [snap-blue]", drv.seen)
	}
}

// gatedBackend passes every call to the backend it wraps, counting them by method; a call of
// the gated method first announces itself on entered and waits until open is closed.
type gatedBackend struct {
	countingBackend
	method  string
	entered chan struct{}
	open    chan struct{}
}

func newGatedBackend(be backends.Backend, method string) *gatedBackend {
	return &gatedBackend{countingBackend: countingBackend{Backend: be, n: map[string]int{}}, method: method,
		entered: make(chan struct{}, 100), open: make(chan struct{})}
}

func (g *gatedBackend) Unary(ctx context.Context, method string, req []byte) ([]byte, error) {
	if method == g.method {
		g.entered <- struct{}{}
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.countingBackend.Unary(ctx, method, req)
}

// waitEntered waits until n gated calls have reached the backend.
func (g *gatedBackend) waitEntered(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-g.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d gated calls reached the backend", i, n)
		}
	}
}

func (g *gatedBackend) count(method string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n[method]
}

// TestTenantIdenticalCallsJoinBeforeQuota: identical CreateVolume (or
// ControllerExpandVolume) calls of a tenant in flight together are one call: under a byte
// quota with room for one of them, all ten callers get the same answer, the backend is called
// once, and the quota holds one volume (one expansion). Tenancy used to take a quota hold for
// each before the serializer joined them: one OK and nine RESOURCE_EXHAUSTED.
func TestTenantIdenticalCallsJoinBeforeQuota(t *testing.T) {
	onEachTransport(t, testTenantIdenticalCallsJoinBeforeQuota)
}

func testTenantIdenticalCallsJoinBeforeQuota(t *testing.T, tr Transport) {
	const mib = 1 << 20
	for _, tc := range []struct {
		method string
		// call makes the call ten callers make at once, after prepare.
		prepare   func(t *testing.T, ctl csi.ControllerClient) string // returns the serial key's object
		call      func(ctx context.Context, ctl csi.ControllerClient, object string) (proto.Message, error)
		kind      objectKind
		wantBytes int64
	}{
		{
			method:  mCreateVolume,
			prepare: func(*testing.T, csi.ControllerClient) string { return "pvc-1" },
			call: func(ctx context.Context, ctl csi.ControllerClient, name string) (proto.Message, error) {
				req := serverCreateVolumeRequest(name)
				req.CapacityRange.RequiredBytes = 12 * mib
				req.Parameters = map[string]string{"tier": "premium", "iops": "3000", "throughput": "125"} // encoded in any order
				return ctl.CreateVolume(ctx, req)
			},
			kind: kindVolumeName, wantBytes: 12 * mib,
		},
		{
			method: "/csi.v1.Controller/ControllerExpandVolume",
			prepare: func(t *testing.T, ctl csi.ControllerClient) string {
				resp, err := ctl.CreateVolume(serverCallCtx(t), serverCreateVolumeRequest("pvc-1")) // 8 MiB
				if err != nil {
					t.Fatal(err)
				}
				return resp.GetVolume().GetVolumeId()
			},
			call: func(ctx context.Context, ctl csi.ControllerClient, id string) (proto.Message, error) {
				return ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id,
					CapacityRange: &csi.CapacityRange{RequiredBytes: 16 * mib}})
			},
			kind: kindVolume, wantBytes: 16 * mib,
		},
	} {
		t.Run(path.Base(tc.method), func(t *testing.T) {
			// 20 MiB: room for one hold of 12 MiB (or of 8 MiB more on the 8 MiB volume), not two.
			ledger := openLedger(t, filepath.Join(t.TempDir(), "tenancy.db"), map[string]tenancy.Quota{"blue": {MaxBytes: 20 * mib}})
			be := newGatedBackend(openEmbedded(t), tc.method)
			gw := startTenantGateway(t, tr, be, ledger, "blue")
			ctl := gw.controller("blue")
			object := tc.prepare(t, ctl)

			const n = 10
			resps := make([]proto.Message, n)
			errs := make([]error, n)
			var answered atomic.Int32
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					resps[i], errs[i] = tc.call(ctx, ctl, object)
					answered.Add(1)
				})
			}
			be.waitEntered(t, 1)
			key := objectKey("blue", tc.kind, object)
			eventually(t, "every caller has joined, or one was answered", func() bool {
				return gw.srv.serializer().waiting(key) == n || answered.Load() > 0
			})
			close(be.open)
			wg.Wait()

			for i := range n {
				if errs[i] != nil || !proto.Equal(resps[i], resps[0]) {
					t.Errorf("caller %d: %v, %v; want what caller 0 got: %v", i, resps[i], errs[i], resps[0])
				}
			}
			if got := be.count(tc.method); got != 1 {
				t.Errorf("%d calls reached the backend, want 1", got)
			}
			list, err := ctl.ListVolumes(serverCallCtx(t), &csi.ListVolumesRequest{})
			if err != nil || len(list.GetEntries()) != 1 {
				t.Errorf("blue lists %v (%v), want its one volume", list.GetEntries(), err)
			}
			if u := usageOf(t, ledger, "blue"); u.Volumes != 1 || u.Bytes != tc.wantBytes {
				t.Errorf("blue's usage: %d volumes, %d bytes; want 1 volume of %d bytes and no hold left", u.Volumes, u.Bytes, tc.wantBytes)
			}
			if got := gw.srv.serializer().InFlight(); got != 0 {
				t.Errorf("%d operations left in flight", got)
			}
		})
	}
}

// TestTenantsIdenticalCallsNeverJoin: two tenants' byte-identical CreateVolume calls in
// flight together are two calls (joining them would hand one tenant the other's volume),
// and neither refuses the other; a different call of one tenant on its own object in flight
// is still ABORTED, in the tenant's own terms.
func TestTenantsIdenticalCallsNeverJoin(t *testing.T) {
	onEachTransport(t, testTenantsIdenticalCallsNeverJoin)
}

func testTenantsIdenticalCallsNeverJoin(t *testing.T, tr Transport) {
	ledger := openLedger(t, filepath.Join(t.TempDir(), "tenancy.db"), map[string]tenancy.Quota{"blue": {}, "green": {}})
	be := newGatedBackend(openEmbedded(t), mCreateVolume)
	gw := startTenantGateway(t, tr, be, ledger, "blue", "green")
	create := func(tenant string, req *csi.CreateVolumeRequest) <-chan error {
		ids := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := gw.controller(tenant).CreateVolume(ctx, req)
			if err == nil && !strings.HasPrefix(resp.GetVolume().GetVolumeId(), tenant+".") {
				err = fmt.Errorf("%s got volume %q, not one of its own", tenant, resp.GetVolume().GetVolumeId())
			}
			ids <- err
		}()
		return ids
	}
	req := serverCreateVolumeRequest("pvc-1")
	blue, green := create("blue", req), create("green", req)
	be.waitEntered(t, 2) // both reached the backend: neither joined the other

	different := serverCreateVolumeRequest("pvc-1")
	different.CapacityRange.RequiredBytes *= 2
	_, err := gw.controller("blue").CreateVolume(serverCallCtx(t), different)
	wantStatus(t, "blue's different CreateVolume of pvc-1", err, codes.Aborted,
		`csi-gateway: volume name "pvc-1": another CreateVolume is already in progress; retry CreateVolume when it has finished`)

	close(be.open)
	for tenant, ch := range map[string]<-chan error{"blue": blue, "green": green} {
		if err := receive(t, ch); err != nil {
			t.Errorf("%s's CreateVolume: %v", tenant, err)
		}
	}
	for _, tenant := range []string{"blue", "green"} {
		list, err := gw.controller(tenant).ListVolumes(serverCallCtx(t), &csi.ListVolumesRequest{})
		if err != nil || len(list.GetEntries()) != 1 {
			t.Errorf("%s lists %v (%v), want its one volume", tenant, list.GetEntries(), err)
		}
	}
	if got := be.count(mCreateVolume); got != 2 {
		t.Errorf("%d CreateVolume calls reached the backend, want 2", got)
	}
}

// listPages walks a tenant's ListVolumes from token by pages of max entries and returns the
// volume IDs and the next_tokens it was given.
func listPages(t *testing.T, ctl csi.ControllerClient, token string, max int32) (ids, tokens []string) {
	t.Helper()
	for range 100 {
		resp, err := ctl.ListVolumes(serverCallCtx(t), &csi.ListVolumesRequest{MaxEntries: max, StartingToken: token})
		if err != nil {
			t.Fatalf("ListVolumes from %q: %v", token, err)
		}
		for _, e := range resp.GetEntries() {
			ids = append(ids, e.GetVolume().GetVolumeId())
		}
		if token = resp.GetNextToken(); token == "" {
			return ids, tokens
		}
		tokens = append(tokens, token)
	}
	t.Fatal("ListVolumes: more than 100 pages")
	return nil, nil
}

// backendTokens returns every next_token the appliance gives, one volume per page.
func backendTokens(t *testing.T, be backends.Backend) []string {
	t.Helper()
	var tokens []string
	for token := ""; ; {
		req, _ := proto.Marshal(&csi.ListVolumesRequest{MaxEntries: 1, StartingToken: token})
		raw, err := be.Unary(serverCallCtx(t), "/csi.v1.Controller/ListVolumes", req)
		var resp csi.ListVolumesResponse
		if err == nil {
			err = proto.Unmarshal(raw, &resp)
		}
		if err != nil {
			t.Fatal(err)
		}
		if token = resp.GetNextToken(); token == "" {
			return tokens
		}
		tokens = append(tokens, token)
	}
}

// TestTenantListTokensSealed: a tenant's next_tokens are sealed for it: a full
// paged listing through them returns exactly its own volumes; no token shows the backend's
// (a position among every tenant's volumes), in its text or decoded; another tenant's token,
// a token changed by one character, or a ListVolumes token in ListSnapshots is ABORTED; a
// token outlives a restart with the same tenancy.tokenKeyFile and is ABORTED after the key
// changed, when the listing restarts from the beginning.
func TestTenantListTokensSealed(t *testing.T) { onEachTransport(t, testTenantListTokensSealed) }

func testTenantListTokensSealed(t *testing.T, tr Transport) {
	dir := t.TempDir()
	key := bytes.Repeat([]byte{0x5c}, tenancy.TokenKeySize)
	quotas := map[string]tenancy.Quota{"blue": {}, "green": {}}
	ledger := openLedger(t, filepath.Join(dir, "tenancy.db"), quotas, tenancy.WithTokenKey(key))
	be := openEmbedded(t)
	gw := startTenantGateway(t, tr, be, ledger, "blue", "green")
	own := map[string][]string{}
	for i := range 5 {
		for _, tenant := range []string{"blue", "green"} {
			resp, err := gw.controller(tenant).CreateVolume(serverCallCtx(t), serverCreateVolumeRequest(fmt.Sprintf("pvc-%d", i)))
			if err != nil {
				t.Fatal(err)
			}
			own[tenant] = append(own[tenant], resp.GetVolume().GetVolumeId())
		}
	}
	slices.Sort(own["blue"]) // a tenant's ListVolumes comes in the order of its volumes' IDs
	secret := backendTokens(t, be)
	if len(secret) != 9 {
		t.Fatalf("the appliance gave %d tokens for 10 volumes", len(secret))
	}

	ids, blueTokens := listPages(t, gw.controller("blue"), "", 2)
	if !slices.Equal(ids, own["blue"]) || len(blueTokens) != 2 {
		t.Fatalf("blue's listing by 2: %v with %d tokens; want %v with 2", ids, len(blueTokens), own["blue"])
	}
	_, greenTokens := listPages(t, gw.controller("green"), "", 1)
	for _, token := range append(slices.Clone(blueTokens), greenTokens...) {
		decoded, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil || len(token) > tenancy.MaxLength {
			t.Errorf("token %q: %d bytes, %v; want base64url within %d bytes", token, len(token), err, tenancy.MaxLength)
		}
		for _, s := range secret {
			if strings.Contains(token, s) || bytes.Contains(decoded, []byte(s)) || bytes.Contains(decoded, []byte("volumes:")) {
				t.Errorf("token %q shows the backend's %q", token, s)
			}
		}
	}

	refused := func(what string, err error) {
		t.Helper()
		st := status.Convert(err)
		if st.Code() != codes.Aborted || !strings.Contains(st.Message(), "the starting_token was not issued to this caller for") {
			t.Errorf("%s: %v %q, want ABORTED saying the token was not issued to this caller", what, st.Code(), st.Message())
		}
	}
	_, err := gw.controller("green").ListVolumes(serverCallCtx(t), &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: blueTokens[0]})
	refused("blue's token given to green", err)
	middle := len(blueTokens[0]) / 2
	tampered := blueTokens[0][:middle] + map[bool]string{true: "A", false: "B"}[blueTokens[0][middle] != 'A'] + blueTokens[0][middle+1:]
	_, err = gw.controller("blue").ListVolumes(serverCallCtx(t), &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: tampered})
	refused("a tampered token", err)
	_, err = gw.controller("blue").ListSnapshots(serverCallCtx(t), &csi.ListSnapshotsRequest{MaxEntries: 2, StartingToken: blueTokens[0]})
	refused("a ListVolumes token in ListSnapshots", err)
	_, err = gw.controller("blue").ListVolumes(serverCallCtx(t), &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: secret[0]})
	refused("the backend's own token", err)

	// A restart (or another replica) with the same key takes the token; with another key it
	// is refused, and the listing restarts from the beginning.
	for _, tc := range []struct {
		name string
		key  []byte
	}{{"the same key", key}, {"a new key", bytes.Repeat([]byte{0x3a}, tenancy.TokenKeySize)}} {
		gw.stop()
		ledger.Close()
		ledger = openLedger(t, filepath.Join(dir, "tenancy.db"), quotas, tenancy.WithTokenKey(tc.key))
		gw = startTenantGateway(t, tr, be, ledger, "blue", "green")
		ids, _ := listPages(t, gw.controller("blue"), "", 2)
		if !slices.Equal(ids, own["blue"]) {
			t.Errorf("%s: blue's listing from the start: %v, want %v", tc.name, ids, own["blue"])
		}
		resp, err := gw.controller("blue").ListVolumes(serverCallCtx(t), &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: blueTokens[0]})
		if !bytes.Equal(tc.key, key) {
			refused(tc.name+": an old token", err)
			continue
		}
		if err != nil || len(resp.GetEntries()) != 2 || resp.GetEntries()[0].GetVolume().GetVolumeId() != own["blue"][2] {
			t.Errorf("%s: blue's second page after a restart: %v, %v; want it to start at %s", tc.name, resp, err, own["blue"][2])
		}
	}
}

// TestTenantRefusesV0: a tenant listener refuses every CSI v0 call with PERMISSION_DENIED
// (v0 IDs are not scoped, docs/versions.md) before the backend sees it, while the same
// tenant's v1 calls are served.
func TestTenantRefusesV0(t *testing.T) {
	ledger := openLedger(t, filepath.Join(t.TempDir(), "tenancy.db"), map[string]tenancy.Quota{"blue": {}})
	be := &countingBackend{Backend: openEmbedded(t), n: map[string]int{}}
	gw := startTenantGateway(t, TransportGRPC, be, ledger, "blue")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for method, req := range testutil.V0Requests(map[string]string{"password": "x"}) {
		err := gw.conns["blue"].Invoke(ctx, method, req, &emptypb.Empty{})
		if st := status.Convert(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "CSI v1 and VolumeGroup calls only") {
			t.Errorf("%s: %v, want PERMISSION_DENIED naming what a tenant listener serves", method, err)
		}
	}
	be.mu.Lock()
	if len(be.n) != 0 {
		t.Errorf("the backend was called for refused v0 calls: %v", be.n)
	}
	be.mu.Unlock()
	if _, err := gw.controller("blue").CreateVolume(ctx, serverCreateVolumeRequest("pvc-1")); err != nil {
		t.Errorf("a v1 CreateVolume of the same tenant: %v", err)
	}
}
