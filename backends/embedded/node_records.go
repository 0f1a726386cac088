package embedded

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
)

// nodeUse is how a volume was staged or published at one path: the capability the CO asked
// for and whether the result is read-only.
type nodeUse struct {
	capability *csi.VolumeCapability
	readonly   bool
}

// same reports whether u and o are the same request, the test of the spec's "identical"
// (stage) and "compatible" (publish) idempotency rules.
func (u nodeUse) same(o nodeUse) bool {
	return u.readonly == o.readonly && proto.Equal(u.capability, o.capability)
}

func (u nodeUse) String() string {
	return fmt.Sprintf("%s (%s)", describeAccess(isBlock(u.capability), u.readonly), u.capability.GetAccessMode().GetMode())
}

// nodeRecords remembers, per volume and path, the nodeUse of every stage and publish this
// process made. It is memory only: the mount table says what is staged and published and
// survives a restart of the process; these records add what the mount table cannot show
// (access mode, mount flags). After a restart they are empty, and a repeated call is judged
// on what the kernel shows alone. Safe for concurrent use.
type nodeRecords struct {
	mu        sync.Mutex
	staged    map[string]map[string]nodeUse // volume ID → staging path → use
	published map[string]map[string]nodeUse // volume ID → target path → use
}

func newNodeRecords() *nodeRecords {
	return &nodeRecords{staged: map[string]map[string]nodeUse{}, published: map[string]map[string]nodeUse{}}
}

func (r *nodeRecords) stage(id, path string) (nodeUse, bool) { return r.get(r.staged, id, path) }
func (r *nodeRecords) setStage(id, path string, u nodeUse)   { r.set(r.staged, id, path, u) }
func (r *nodeRecords) dropStage(id, path string)             { r.drop(r.staged, id, path) }

func (r *nodeRecords) publication(id, path string) (nodeUse, bool) {
	return r.get(r.published, id, path)
}
func (r *nodeRecords) setPublication(id, path string, u nodeUse) { r.set(r.published, id, path, u) }
func (r *nodeRecords) dropPublication(id, path string)           { r.drop(r.published, id, path) }

// paths lists, sorted, the staging and target paths this process staged and published volume
// id at and has not undone.
func (r *nodeRecords) paths(id string) (staged, published []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.staged[id])), slices.Sorted(maps.Keys(r.published[id]))
}

func (r *nodeRecords) get(m map[string]map[string]nodeUse, id, path string) (nodeUse, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	u, ok := m[id][path]
	return u, ok
}

func (r *nodeRecords) set(m map[string]map[string]nodeUse, id, path string, u nodeUse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m[id] == nil {
		m[id] = map[string]nodeUse{}
	}
	u.capability = proto.Clone(u.capability).(*csi.VolumeCapability)
	m[id][path] = u
}

func (r *nodeRecords) drop(m map[string]map[string]nodeUse, id, path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(m[id], path)
	if len(m[id]) == 0 {
		delete(m, id)
	}
}
