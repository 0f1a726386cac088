// Package bytesize reads and writes the byte counts of the gateway's configuration and flags:
// plain bytes ("16384"), or a whole number with a binary unit (Ki, Mi, Gi, Ti, Pi) or a
// decimal one (k or K, M, G, T, P), which may end in B ("16KiB", "10GB"). Size and Size32 are
// the configuration's size types: a YAML number is bytes, a string is read by Parse. It
// parses nothing but sizes.
package bytesize
