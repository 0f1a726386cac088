package main

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/internal/bytesize"
)

// alias is a short form of `csi-gateway call`: arguments and flags instead of JSON. It shares
// everything else with the generic form: endpoint, secrets, redaction, output, exit status.
type alias struct {
	use      string   // name and positional arguments, e.g. "create-volume NAME"
	short    string   // help line
	method   string   // the method called, Service/Method
	flags    []string // the flags it takes, by name in aliasFlagDefs
	required []string // those of flags that must be given
	// build makes the request; nil sends an empty one.
	build func(args []string, f *aliasFlags) (proto.Message, error)
	// after, when set, is given the response of a successful call before it is printed.
	after func(resp proto.Message, f *aliasFlags) error
	// combine, when set, replaces method and build: each part is called with an empty request
	// and the responses are printed as one object, a member per part.
	combine []aliasPart
}

type aliasPart struct{ key, method string }

// callAliases is the table of short forms, one builder each.
var callAliases = []alias{
	{use: "info", short: "Plugin name and version", method: "Identity/GetPluginInfo"},
	{use: "probe", short: "Whether the plugin is ready", method: "Identity/Probe"},
	{use: "caps", short: "Plugin, controller and node capabilities in one object", combine: []aliasPart{
		{"plugin", "Identity/GetPluginCapabilities"},
		{"controller", "Controller/ControllerGetCapabilities"},
		{"node", "Node/NodeGetCapabilities"},
	}},
	{use: "node-info", short: "Node ID, topology and volume limit", method: "Node/NodeGetInfo"},

	{use: "create-volume NAME", short: "Create a volume", method: "Controller/CreateVolume",
		flags: []string{"size", "block", "fs", "access-mode", "param"},
		build: func(a []string, f *aliasFlags) (proto.Message, error) {
			size, err := f.capacity(false)
			if err != nil {
				return nil, err
			}
			vc, err := f.capability()
			if err != nil {
				return nil, err
			}
			params, err := keyValues("--param", f.params)
			return &csi.CreateVolumeRequest{Name: a[0], CapacityRange: size,
				VolumeCapabilities: []*csi.VolumeCapability{vc}, Parameters: params}, err
		}},
	{use: "delete-volume ID", short: "Delete a volume", method: "Controller/DeleteVolume",
		build: func(a []string, _ *aliasFlags) (proto.Message, error) {
			return &csi.DeleteVolumeRequest{VolumeId: a[0]}, nil
		}},
	{use: "get-volume ID", short: "Show a volume and its condition", method: "Controller/ControllerGetVolume",
		build: func(a []string, _ *aliasFlags) (proto.Message, error) {
			return &csi.ControllerGetVolumeRequest{VolumeId: a[0]}, nil
		}},
	{use: "list-volumes", short: "List volumes, a page at a time", method: "Controller/ListVolumes",
		flags: []string{"max", "token"},
		build: func(_ []string, f *aliasFlags) (proto.Message, error) {
			return &csi.ListVolumesRequest{MaxEntries: f.max, StartingToken: f.token}, nil
		}},
	{use: "expand-volume ID", short: "Grow a volume", method: "Controller/ControllerExpandVolume",
		flags: []string{"size"}, required: []string{"size"},
		build: func(a []string, f *aliasFlags) (proto.Message, error) {
			size, err := f.capacity(true)
			return &csi.ControllerExpandVolumeRequest{VolumeId: a[0], CapacityRange: size}, err
		}},
	{use: "publish ID", short: "Attach a volume to a node (ControllerPublishVolume)", method: "Controller/ControllerPublishVolume",
		flags: []string{"node", "readonly", "block", "fs", "access-mode", "save-publish-context"}, required: []string{"node"},
		build: func(a []string, f *aliasFlags) (proto.Message, error) {
			vc, err := f.capability()
			return &csi.ControllerPublishVolumeRequest{VolumeId: a[0], NodeId: f.node, VolumeCapability: vc, Readonly: f.readonly}, err
		},
		after: func(resp proto.Message, f *aliasFlags) error {
			return savePublishContext(f.savePublishContext, resp.(*csi.ControllerPublishVolumeResponse).GetPublishContext())
		}},
	{use: "unpublish ID", short: "Detach a volume from a node, or from all (ControllerUnpublishVolume)", method: "Controller/ControllerUnpublishVolume",
		flags: []string{"node"},
		build: func(a []string, f *aliasFlags) (proto.Message, error) {
			return &csi.ControllerUnpublishVolumeRequest{VolumeId: a[0], NodeId: f.node}, nil
		}},

	{use: "create-snapshot NAME", short: "Snapshot a volume", method: "Controller/CreateSnapshot",
		flags: []string{"source", "param"}, required: []string{"source"},
		build: func(a []string, f *aliasFlags) (proto.Message, error) {
			params, err := keyValues("--param", f.params)
			return &csi.CreateSnapshotRequest{Name: a[0], SourceVolumeId: f.source, Parameters: params}, err
		}},
	{use: "delete-snapshot ID", short: "Delete a snapshot", method: "Controller/DeleteSnapshot",
		build: func(a []string, _ *aliasFlags) (proto.Message, error) {
			return &csi.DeleteSnapshotRequest{SnapshotId: a[0]}, nil
		}},
	{use: "list-snapshots", short: "List snapshots, a page at a time", method: "Controller/ListSnapshots",
		flags: []string{"max", "token", "source"},
		build: func(_ []string, f *aliasFlags) (proto.Message, error) {
			return &csi.ListSnapshotsRequest{MaxEntries: f.max, StartingToken: f.token, SourceVolumeId: f.source}, nil
		}},

	{use: "stage ID", short: "Stage a volume on this node (NodeStageVolume)", method: "Node/NodeStageVolume",
		flags: []string{"staging-path", "block", "fs", "access-mode", "publish-context", "publish-context-file"}, required: []string{"staging-path"},
		build: func(a []string, f *aliasFlags) (proto.Message, error) {
			vc, err := f.capability()
			if err != nil {
				return nil, err
			}
			pc, err := f.publishContextMap()
			return &csi.NodeStageVolumeRequest{VolumeId: a[0], StagingTargetPath: f.stagingPath, VolumeCapability: vc, PublishContext: pc}, err
		}},
	{use: "unstage ID", short: "Unstage a volume (NodeUnstageVolume)", method: "Node/NodeUnstageVolume",
		flags: []string{"staging-path"}, required: []string{"staging-path"},
		build: func(a []string, f *aliasFlags) (proto.Message, error) {
			return &csi.NodeUnstageVolumeRequest{VolumeId: a[0], StagingTargetPath: f.stagingPath}, nil
		}},
	{use: "node-publish ID", short: "Mount a staged volume at a target path (NodePublishVolume)", method: "Node/NodePublishVolume",
		flags:    []string{"staging-path", "target-path", "readonly", "block", "fs", "access-mode", "publish-context", "publish-context-file"},
		required: []string{"staging-path", "target-path"},
		build: func(a []string, f *aliasFlags) (proto.Message, error) {
			vc, err := f.capability()
			if err != nil {
				return nil, err
			}
			pc, err := f.publishContextMap()
			return &csi.NodePublishVolumeRequest{VolumeId: a[0], StagingTargetPath: f.stagingPath, TargetPath: f.targetPath,
				VolumeCapability: vc, Readonly: f.readonly, PublishContext: pc}, err
		}},
	{use: "node-unpublish ID", short: "Unmount a volume from its target path (NodeUnpublishVolume)", method: "Node/NodeUnpublishVolume",
		flags: []string{"target-path"}, required: []string{"target-path"},
		build: func(a []string, f *aliasFlags) (proto.Message, error) {
			return &csi.NodeUnpublishVolumeRequest{VolumeId: a[0], TargetPath: f.targetPath}, nil
		}},
}

// aliasFlags holds every flag an alias may take; each alias registers only those it names.
type aliasFlags struct {
	size, fs, accessMode, node, stagingPath, targetPath, source, token string
	publishContextFile, savePublishContext                             string
	block, readonly                                                    bool
	max                                                                int32
	params, publishContext                                             []string
}

// defaultAccessMode is the access mode of --access-mode when it is not given.
const defaultAccessMode = "SINGLE_NODE_WRITER"

// aliasFlag is an alias flag: the field of aliasFlags it sets (a *string, *bool, *int32 or
// *[]string), its default when a string's is not "", and its help.
type aliasFlag struct {
	field func(*aliasFlags) any
	def   string
	help  string
}

// aliasFlagDefs defines each alias flag once: name, field, default and help.
var aliasFlagDefs = map[string]aliasFlag{
	"size":                 {field: func(f *aliasFlags) any { return &f.size }, help: "capacity: bytes, or with a unit: 512Mi, 1Gi, 10G"},
	"block":                {field: func(f *aliasFlags) any { return &f.block }, help: "raw block volume instead of a file system"},
	"fs":                   {field: func(f *aliasFlags) any { return &f.fs }, help: "file system type, e.g. ext4 (default: the driver's)"},
	"access-mode":          {field: func(f *aliasFlags) any { return &f.accessMode }, def: defaultAccessMode, help: "access mode, e.g. SINGLE_NODE_WRITER, MULTI_NODE_READER_ONLY"},
	"param":                {field: func(f *aliasFlags) any { return &f.params }, help: "parameter key=value (repeatable)"},
	"publish-context":      {field: func(f *aliasFlags) any { return &f.publishContext }, help: "publish context key=value from ControllerPublishVolume (repeatable)"},
	"publish-context-file": {field: func(f *aliasFlags) any { return &f.publishContextFile }, help: "read the publish context from this JSON file, as publish --save-publish-context wrote it (--publish-context entries override it)"},
	"save-publish-context": {field: func(f *aliasFlags) any { return &f.savePublishContext }, help: "write the answer's publish context, unredacted, to this JSON file (mode 0600) for stage and node-publish --publish-context-file; the printed answer stays redacted"},
	"node":                 {field: func(f *aliasFlags) any { return &f.node }, help: "node ID"},
	"readonly":             {field: func(f *aliasFlags) any { return &f.readonly }, help: "publish read-only"},
	"staging-path":         {field: func(f *aliasFlags) any { return &f.stagingPath }, help: "staging target path on the node"},
	"target-path":          {field: func(f *aliasFlags) any { return &f.targetPath }, help: "target path on the node"},
	"source":               {field: func(f *aliasFlags) any { return &f.source }, help: "source volume ID"},
	"max":                  {field: func(f *aliasFlags) any { return &f.max }, help: "at most this many entries (0: the driver decides)"},
	"token":                {field: func(f *aliasFlags) any { return &f.token }, help: "starting token: next_token of the previous page"},
}

// define adds flag name to c, bound to its field of f. A field of another type is a
// programming error and panics.
func (d aliasFlag) define(c *cobra.Command, name string, f *aliasFlags) {
	switch p := d.field(f).(type) {
	case *string:
		c.Flags().StringVar(p, name, d.def, d.help)
	case *bool:
		c.Flags().BoolVar(p, name, false, d.help)
	case *int32:
		c.Flags().Int32Var(p, name, 0, d.help)
	case *[]string:
		c.Flags().StringArrayVar(p, name, nil, d.help)
	default:
		panic(fmt.Sprintf("alias flag %q: field of type %T", name, p))
	}
}

// command builds the cobra command of an alias. An alias naming a flag aliasFlagDefs does not
// define is a programming error and panics.
func (a alias) command(o *callOptions) *cobra.Command {
	f := &aliasFlags{}
	called := a.method
	if a.combine != nil {
		var ms []string
		for _, p := range a.combine {
			ms = append(ms, p.method)
		}
		called = strings.Join(ms, ", ")
	}
	cmd := &cobra.Command{
		Use:   a.use,
		Short: a.short,
		Long:  a.short + ".\n\nCalls " + called + "; see csi-gateway call --help for the flags every call takes.",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return finishUsage(cmd, "call", o.runAlias(cmd, a, f, args))
		},
	}
	for _, name := range a.flags {
		def, ok := aliasFlagDefs[name]
		if !ok {
			panic(fmt.Sprintf("call alias %q: no flag %q in aliasFlagDefs", a.use, name))
		}
		def.define(cmd, name, f)
	}
	return cmd
}

// runAlias checks the arguments and required flags, builds the request and sends it.
func (o *callOptions) runAlias(cmd *cobra.Command, a alias, f *aliasFlags, args []string) error {
	words := strings.Fields(a.use)
	if want := words[1:]; len(args) != len(want) {
		if len(want) == 0 {
			return usagef("%s takes no arguments; got %q", words[0], args)
		}
		return usagef("%s takes %s; got %d argument(s)", words[0], strings.Join(want, " "), len(args))
	}
	for _, name := range a.required {
		if !cmd.Flags().Changed(name) {
			return usagef("%s: --%s is required", words[0], name)
		}
	}
	var calls []outgoing
	for _, p := range a.combine {
		m, err := resolveMethod(p.method)
		if err != nil {
			return err
		}
		calls = append(calls, outgoing{key: p.key, method: m, req: m.newMessage(m.desc.Input())})
	}
	if a.combine == nil {
		m, err := resolveMethod(a.method)
		if err != nil {
			return err
		}
		req := m.newMessage(m.desc.Input())
		if a.build != nil {
			if req, err = a.build(args, f); err != nil {
				return err
			}
		}
		calls = []outgoing{{method: m, req: req}}
		if a.after != nil {
			calls[0].after = func(resp proto.Message) error { return a.after(resp, f) }
		}
	}
	return o.send(cmd, calls)
}

// capability is the volume capability the flags describe: a block volume (--block) or a
// mount of --fs, with --access-mode.
func (f *aliasFlags) capability() (*csi.VolumeCapability, error) {
	name := strings.ToUpper(strings.ReplaceAll(cmp.Or(f.accessMode, defaultAccessMode), "-", "_"))
	mode, ok := csi.VolumeCapability_AccessMode_Mode_value[name]
	if !ok || mode == int32(csi.VolumeCapability_AccessMode_UNKNOWN) {
		var names []string
		for i := int32(1); csi.VolumeCapability_AccessMode_Mode_name[i] != ""; i++ {
			names = append(names, csi.VolumeCapability_AccessMode_Mode_name[i])
		}
		return nil, usagef("--access-mode %q: want one of %s", f.accessMode, strings.Join(names, ", "))
	}
	vc := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_Mode(mode)}}
	if f.block {
		if f.fs != "" {
			return nil, usagef("--block and --fs %s exclude each other: a block volume has no file system", f.fs)
		}
		vc.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		vc.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: f.fs}}
	}
	return vc, nil
}

// capacity is the capacity range of --size: nil when it is not given and not required.
func (f *aliasFlags) capacity(required bool) (*csi.CapacityRange, error) {
	if f.size == "" && !required {
		return nil, nil
	}
	n, err := bytesize.Parse(f.size)
	if err != nil {
		return nil, usagef("--size %q: %v", f.size, err)
	}
	return &csi.CapacityRange{RequiredBytes: n}, nil
}

// keyValues turns repeated key=value flags into a map; nil when there are none.
func keyValues(flag string, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("%s %q: want key=value", flag, kv)
		}
		m[k] = v
	}
	return m, nil
}
