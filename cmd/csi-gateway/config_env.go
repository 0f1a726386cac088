package main

import (
	"slices"
	"strings"
)

// envPrefix begins every environment variable that sets a configuration key: CSIGW_, then the
// key's path upper-cased with "_" for "." (CSIGW_LOGGING_LEVEL sets logging.level).
const envPrefix = "CSIGW_"

// envName is the variable that sets key (a viper key path, lower-case).
func envName(key string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// checkEnv reports every CSIGW_* variable of environ (KEY=value entries) that sets nothing,
// in sorted order, with the nearest variable that does: "CSIGW_SOCKETMDOE: unknown
// environment variable (did you mean CSIGW_SOCKET_MODE?)". The variables that set something
// are those of keys, the keys the configuration has (its defaults' and its file's), and
// CSIGW_SOCKET_MODE. Values are never repeated: one may be a secret.
func checkEnv(environ, keys []string, errs *configErrors) {
	known := map[string]structKey{strings.ToLower(socketModeVar): {name: socketModeVar}}
	for _, k := range keys {
		name := envName(k)
		known[strings.ToLower(name)] = structKey{name: name}
	}
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) {
			continue
		}
		if _, ok := known[strings.ToLower(name)]; !ok {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range slices.Compact(unknown) {
		errs.addf(name, "unknown environment variable%s", suggestion(name, known))
	}
}
