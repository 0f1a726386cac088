package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// probeFS reports what dev holds: the type of its file system, or else the type of its
// partition table, or neither (blkid --probe, which reads the device, not a cache).
func (n *nodeService) probeFS(ctx context.Context, dev string) (fsType, ptType string, err error) {
	out, err := n.run(ctx, "blkid", "--probe", "--output", "export", dev)
	var tool *toolError
	if errors.As(err, &tool) && tool.exitCode() == 2 { // blkid: nothing recognized
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	for line := range strings.Lines(out) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch k {
		case "TYPE":
			fsType = v
		case "PTTYPE":
			ptType = v
		}
	}
	return fsType, ptType, nil
}

// makeFS makes an ext4 file system on dev. The inode tables and the journal are initialized
// lazily by the kernel after the first mount, so a large sparse image is ready at once and
// stays sparse.
func (n *nodeService) makeFS(ctx context.Context, dev string) error {
	if _, err := n.run(ctx, "mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=1,lazy_journal_init=1", dev); err != nil {
		return fmt.Errorf("make an ext4 file system: %w", err)
	}
	return nil
}

// Fields of the ext4 superblock, which starts 1024 bytes into the device.
const (
	sbOffset          = 1024
	sbSize            = 1024
	sbBlocksCountLo   = 0x04
	sbLogBlockSize    = 0x18
	sbMagic           = 0x38
	sbFeatureIncompat = 0x60
	sbBlocksCountHi   = 0x150
	ext4Magic         = 0xEF53
	incompat64Bit     = 0x80
)

// fsSize reads the size in bytes of the ext4 file system on dev from its superblock. For a
// mounted file system the kernel keeps the superblock in the device's page cache, so this
// sees an online resize at once.
func fsSize(dev string) (int64, error) {
	f, err := os.Open(dev)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sb := make([]byte, sbSize)
	if _, err := f.ReadAt(sb, sbOffset); err != nil {
		return 0, fmt.Errorf("read the superblock of %s: %w", dev, err)
	}
	return parseExt4Size(sb)
}

// parseExt4Size reads the file system size out of an ext4 superblock.
func parseExt4Size(sb []byte) (int64, error) {
	le := binary.LittleEndian
	if len(sb) < sbSize || le.Uint16(sb[sbMagic:]) != ext4Magic {
		return 0, errors.New("no ext4 superblock")
	}
	logBS := le.Uint32(sb[sbLogBlockSize:])
	if logBS > 6 { // ext4 blocks are 1 KiB to 64 KiB
		return 0, fmt.Errorf("ext4 superblock gives a block size of 2^%d KiB", logBS)
	}
	blocks := uint64(le.Uint32(sb[sbBlocksCountLo:]))
	if le.Uint32(sb[sbFeatureIncompat:])&incompat64Bit != 0 {
		blocks |= uint64(le.Uint32(sb[sbBlocksCountHi:])) << 32
	}
	if blocks > 1<<47 || blocks > math.MaxInt64>>(10+logBS) { // the size must fit an int64
		return 0, fmt.Errorf("ext4 superblock gives %d blocks of 2^%d KiB", blocks, logBS)
	}
	return int64(blocks) << (10 + logBS), nil
}

// growOffline grows the unmounted ext4 file system on dev to the size of dev: resize2fs
// wants a freshly checked file system, so e2fsck goes first. Growing offline needs no
// capability beyond opening the device.
func (n *nodeService) growOffline(ctx context.Context, dev string) error {
	_, err := n.run(ctx, "e2fsck", "-f", "-p", dev)
	var tool *toolError
	if err != nil && !(errors.As(err, &tool) && tool.exitCode() > 0 && tool.exitCode() < 4) { // 1, 2: errors fixed
		return fmt.Errorf("check the file system before growing it: %w", err)
	}
	if _, err := n.run(ctx, "resize2fs", dev); err != nil {
		return fmt.Errorf("grow the file system: %w", err)
	}
	return nil
}

// growOnline grows the ext4 file system on dev, mounted read-write, to the size of dev. The
// kernel allows that only to a process with CAP_SYS_RESOURCE; without it the volume can still
// grow offline, when it is next staged.
func (n *nodeService) growOnline(ctx context.Context, volID, dev string) error {
	_, err := n.run(ctx, "resize2fs", dev)
	var tool *toolError
	if errors.As(err, &tool) && tool.denied() {
		return status.Errorf(codes.FailedPrecondition, "volume %s: the kernel refused to grow its mounted file system (%s); growing online needs CAP_SYS_RESOURCE, so grant it to this process, or unstage and stage the volume again to grow it offline", volID, tool.output)
	}
	if err != nil {
		return fmt.Errorf("grow the file system: %w", err)
	}
	return nil
}
