package cspfake

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Profile selects how closely the fake imitates one real CSP, quirks included.
type Profile string

// The profiles. See the package documentation for what each one changes.
const (
	ProfileSpec    Profile = "spec"
	ProfileHPE     Profile = "hpe"
	ProfileTrueNAS Profile = "truenas"
)

// Options configure a Fake.
type Options struct {
	// Profile is the CSP imitated; "" means ProfileSpec.
	Profile Profile
	// Username and Password are the credentials POST /tokens accepts. The truenas profile
	// ignores the username, as truenas-csp does.
	Username, Password string
	// TokenTTL is the lifetime of a session token; 0 means 1 hour (24 hours in the truenas
	// profile).
	TokenTTL time.Duration
	// ArrayIP, when set, must equal the x-array-ip header of every call and the array_ip of
	// POST /tokens; otherwise the answer is 400. The truenas profile always requires some
	// array IP, as truenas-csp does.
	ArrayIP string
	// Validate checks every request and response against the embedded openapi.yaml plus
	// the written deviation list; see ContractViolations.
	Validate bool
	// SnapshotReadyAfter is how many GETs report a new snapshot with ready_to_use=false
	// before it turns true; 0 means ready at once.
	SnapshotReadyAfter int
	// ReturnExistingOnDuplicate makes POST /volumes with a name in use answer 200 with the
	// existing volume instead of 409 (CSP-MAPPING §7 "switchable"). Not in truenas, whose
	// duplicate is always a 500 traceback.
	ReturnExistingOnDuplicate bool
}

// Fake is an in-process CSP server. It is an http.Handler; serve it with
// net/http/httptest. All state is in memory, and all methods are safe for concurrent use.
type Fake struct {
	opts     Options
	contract *contract // nil unless Options.Validate

	mu             sync.Mutex
	seq            uint64 // creation order of every object
	tokens         map[string]*token
	hosts          map[string]*host // by uuid
	volumes        map[string]*volume
	snapshots      map[string]*snapshot
	volumeGroups   map[string]*volumeGroup
	snapshotGroups map[string]*snapshotGroup
	logins         int
	loginFailures  int
	faults         []*pendingFault
	calls          []Call
	violations     []string
	secrets        map[string]struct{} // values the call log must never show
}

// New returns a Fake for the options. It fails on an unknown profile and, with Validate,
// when the embedded contract does not load.
func New(o Options) (*Fake, error) {
	switch o.Profile {
	case "":
		o.Profile = ProfileSpec
	case ProfileSpec, ProfileHPE, ProfileTrueNAS:
	default:
		return nil, fmt.Errorf("cspfake: unknown profile %q", o.Profile)
	}
	if o.TokenTTL <= 0 {
		o.TokenTTL = time.Hour
		if o.Profile == ProfileTrueNAS {
			o.TokenTTL = 24 * time.Hour
		}
	}
	f := &Fake{
		opts:           o,
		tokens:         map[string]*token{},
		hosts:          map[string]*host{},
		volumes:        map[string]*volume{},
		snapshots:      map[string]*snapshot{},
		volumeGroups:   map[string]*volumeGroup{},
		snapshotGroups: map[string]*snapshotGroup{},
		secrets:        map[string]struct{}{},
	}
	f.addSecret(o.Password)
	if o.Validate {
		c, err := sharedContract()
		if err != nil {
			return nil, err
		}
		f.contract = c
	}
	return f, nil
}

// apiPrefix is where the CSP API lives under any base path.
const apiPrefix = "/containers/v1"

// maxBody bounds the request bodies the fake reads.
const maxBody = 1 << 20

// ServeHTTP serves paths of the form <any prefix>/containers/v1/<route>. Anything else is
// a 404 with an HTML body, as a proxy in front of a CSP would answer, so that a client
// with a wrong base path can tell.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	rel, ok := relativePath(r.URL.Path)
	if !ok {
		rep := htmlNotFound()
		f.record(r, r.URL.Path, body, rep, nil)
		rep.write(w)
		return
	}
	rt, params, known := match(r.Method, rel)

	fault := f.takeFault(r.Method, rel)
	if fault != nil && fault.Latency > 0 {
		timer := time.NewTimer(fault.Latency)
		select {
		case <-timer.C:
		case <-r.Context().Done():
			timer.Stop()
			f.record(r, rel, body, reply{}, fault)
			return
		}
	}

	var rep reply
	if fault != nil && fault.Status != 0 {
		rep = fault.reply()
	} else {
		rep = f.handle(r, rt, known, params, body)
	}
	f.check(r, rel, rt, known, params, body, rep, fault)
	f.record(r, rel, body, rep, fault)

	switch {
	case fault != nil && fault.DropReply:
		dropConnection(w, nil)
	case fault != nil && fault.CutReply:
		dropConnection(w, &rep)
	default:
		rep.write(w)
	}
}

// relativePath returns the part of p after the first "/containers/v1", which must be
// followed by "/" and a route.
func relativePath(p string) (string, bool) {
	i := strings.Index(p, apiPrefix+"/")
	if i < 0 {
		return "", false
	}
	return p[i+len(apiPrefix):], true
}

// request is what a route handler sees.
type request struct {
	params map[string]string // path parameters by name
	query  map[string][]string
	header http.Header
	body   map[string]any // the JSON object body; nil when there is none
}

func (q *request) param(name string) string { return q.params[name] }

func (q *request) queryValue(name string) string {
	if v := q.query[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// handle answers a request to a CSP route: routing, x-array-ip, authentication, and the
// route's handler, all under the state lock.
func (f *Fake) handle(r *http.Request, rt *route, known bool, params map[string]string, body []byte) reply {
	switch {
	case rt == nil && known:
		return f.methodNotAllowed()
	case rt == nil:
		return htmlNotFound()
	case rt.group && f.opts.Profile == ProfileTrueNAS:
		return reply{status: http.StatusNotFound} // truenas-csp has no such route
	}
	q := &request{params: params, query: r.URL.Query(), header: r.Header}
	if len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&q.body); err != nil || q.body == nil {
			return f.malformedBody()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if rt.op == "createToken" {
		return f.createToken(q)
	}
	if rep, ok := f.authenticate(q); !ok {
		return rep
	}
	return rt.handle(f, q)
}

// nextSeq returns the next creation sequence number. Callers hold f.mu.
func (f *Fake) nextSeq() uint64 {
	f.seq++
	return f.seq
}

// hexID returns a Nimble-style object id: 42 lower-case hex characters.
func hexID() string { return randomHex(21) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// bySeq sorts objects in creation order.
// inOrder returns the records of m in creation order.
func inOrder[T any](m map[string]T, seq func(T) uint64) []T {
	return bySeq(slices.Collect(maps.Values(m)), seq)
}

func bySeq[T any](items []T, seq func(T) uint64) []T {
	sort.Slice(items, func(i, j int) bool { return seq(items[i]) < seq(items[j]) })
	return items
}

// Counters are counts for assertions.
type Counters struct {
	// Logins counts successful POST /tokens; LoginFailures counts 400 and 401 answers to it.
	Logins, LoginFailures int
	// Volumes, Snapshots, Hosts, VolumeGroups and SnapshotGroups count objects that exist
	// now. Snapshots includes those hidden by the truenas delete quirk.
	Volumes, Snapshots, Hosts, VolumeGroups, SnapshotGroups int
	// Publishes counts active (volume, host) publications.
	Publishes int
}

// Counters returns the current counts.
func (f *Fake) Counters() Counters {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := Counters{
		Logins:         f.logins,
		LoginFailures:  f.loginFailures,
		Volumes:        len(f.volumes),
		Snapshots:      len(f.snapshots),
		Hosts:          len(f.hosts),
		VolumeGroups:   len(f.volumeGroups),
		SnapshotGroups: len(f.snapshotGroups),
	}
	for _, v := range f.volumes {
		c.Publishes += len(v.pubs)
	}
	return c
}
