package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/csi-gateway/csi-gateway/backends/embedded"
	"github.com/csi-gateway/csi-gateway/backends/rest/connect"
	"github.com/csi-gateway/csi-gateway/proxy"
)

// applianceOptions are the flags of `csi-gateway appliance`.
type applianceOptions struct {
	endpoint   string
	httpAddr   string
	socketMode uint32
	grace      time.Duration
	logLevel   slog.Level
	cfg        embedded.Config
}

func newApplianceCommand() *cobra.Command {
	d := embedded.DefaultConfig()
	o := applianceOptions{cfg: d, socketMode: uint32(proxy.DefaultSocketMode)}
	cmd := &cobra.Command{
		Use:   "appliance --data DIR --endpoint unix:///PATH.sock [--http 127.0.0.1:PORT]",
		Short: "Serve the reference appliance as a CSI driver (gRPC) and, with --http, over HTTP",
		Long: `Serve the reference appliance: a durable, file-backed CSI storage service.

Volumes are sparse image files under --data; the state is one file replaced atomically on
every change, so a crash loses nothing that was acknowledged. The CSI services (Identity,
Controller, GroupController, Node, csi-addons VolumeGroup) are served on --endpoint, and with
--http also in the Connect protocol's unary JSON form (see docs/rest-protocol.md).
Node calls mount for real and need root.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serveAppliance(cmd.Context(), o, newLogger(cmd.ErrOrStderr(), o.logLevel, "json"))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.cfg.DataDir, "data", "", "directory for the state file and the images (required)")
	f.StringVar(&o.endpoint, "endpoint", "", "gRPC endpoint: unix:///path.sock or tcp://host:port (required)")
	f.StringVar(&o.httpAddr, "http", "", "also serve the Connect JSON protocol on this host:port")
	f.Uint32Var(&o.socketMode, "socket-mode", o.socketMode, "permission bits of the Unix socket")
	f.DurationVar(&o.grace, "grace", 10*time.Second, "how long in-flight calls may finish after SIGTERM")
	f.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "debug, info, warn or error")
	f.StringVar(&o.cfg.DriverName, "driver-name", d.DriverName, "plugin name reported by GetPluginInfo")
	f.StringVar(&o.cfg.NodeID, "node-id", d.NodeID, "node ID reported by NodeGetInfo")
	f.StringSliceVar(&o.cfg.KnownNodes, "known-node", nil, "further node IDs ControllerPublishVolume accepts (repeatable)")
	f.StringVar(&o.cfg.Zone, "zone", d.Zone, "topology zone of every volume and node")
	f.Int64Var(&o.cfg.CapacityBytes, "capacity", d.CapacityBytes, "total bytes the appliance may provision")
	f.Int64Var(&o.cfg.MaxVolumeBytes, "max-volume-size", d.MaxVolumeBytes, "largest volume in bytes")
	f.Int64Var(&o.cfg.MaxVolumesPerNode, "max-volumes-per-node", 0, "volumes one node may have published (0 = no limit)")
	cmd.MarkFlagRequired("data")
	cmd.MarkFlagRequired("endpoint")
	return cmd
}

// serveAppliance runs the appliance until ctx ends, then drains: in-flight calls get o.grace
// to finish before they are cut off, and the socket is removed.
func serveAppliance(ctx context.Context, o applianceOptions, log *slog.Logger) error {
	ep, err := proxy.ParseEndpoint(o.endpoint)
	if err != nil {
		return fmt.Errorf("--endpoint: %w", err)
	}
	a, err := embedded.Open(o.cfg, log)
	if err != nil {
		return fmt.Errorf("--data: %w", err)
	}
	defer a.Close()

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(logCalls(log)))
	a.Register(srv)
	lis, err := proxy.Listen(ep, fsMode(o.socketMode))
	if err != nil {
		return fmt.Errorf("--endpoint %s: %w", ep, err)
	}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(lis) }()

	var httpSrv *http.Server
	if o.httpAddr != "" {
		hl, err := net.Listen("tcp", o.httpAddr)
		if err != nil {
			srv.Stop()
			return fmt.Errorf("--http %s: %w", o.httpAddr, err)
		}
		var services connect.Registrar
		a.Register(&services)
		httpSrv = &http.Server{Handler: connect.NewHandler(services.Services()), ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- httpSrv.Serve(hl) }()
		log.Info("serving HTTP (Connect JSON)", "address", hl.Addr().String())
	}
	cfg := a.Config()
	log.Info("appliance ready", "endpoint", ep.String(), "data", cfg.DataDir, "driver", cfg.DriverName, "node_id", cfg.NodeID)

	select {
	case <-ctx.Done():
		log.Info("stopping: draining in-flight calls", "grace", o.grace)
	case err := <-errc:
		srv.Stop()
		return fmt.Errorf("serve: %w", err)
	}
	drained := make(chan struct{})
	go func() {
		if httpSrv != nil {
			sctx, cancel := context.WithTimeout(context.Background(), o.grace)
			httpSrv.Shutdown(sctx)
			cancel()
		}
		srv.GracefulStop()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(o.grace):
		log.Warn("grace period over: cancelling the calls still running")
		srv.Stop()
		if httpSrv != nil {
			httpSrv.Close()
		}
		<-drained
	}
	return nil
}
