package main

import (
	"encoding"
	"fmt"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"

	"github.com/csi-gateway/csi-gateway/proxy"
)

// A socket mode is parsed as one type from the file (mapstructure under viper), the variable
// and the flags.
var (
	_ mapstructure.Unmarshaler = (*proxy.SocketMode)(nil)
	_ encoding.TextUnmarshaler = (*proxy.SocketMode)(nil)
	_ pflag.Value              = (*proxy.SocketMode)(nil)
)

// socketModeVar sets the first listener's socketMode, as --socket-mode does; a listener in a
// list has no CSIGW_* key path of its own.
const socketModeVar = "CSIGW_SOCKET_MODE"

// overrideSocketMode sets the first listener's socketMode from CSIGW_SOCKET_MODE (empty: not
// set), then from --socket-mode, each parsed as the key is (proxy.SocketMode). The listeners
// are there: applyDefaults made one if the configuration had none.
func (c *Config) overrideSocketMode(flags *pflag.FlagSet, getenv func(string) string) error {
	if s := getenv(socketModeVar); s != "" {
		if err := c.Listeners[0].SocketMode.Set(s); err != nil {
			return fmt.Errorf("%s: %w", socketModeVar, err)
		}
	}
	if f := flags.Lookup("socket-mode"); f != nil && f.Changed {
		c.Listeners[0].SocketMode = *f.Value.(*proxy.SocketMode)
	}
	return nil
}
