package csp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// The CSP's JSON objects, read tolerantly: unknown fields are ignored, and sizes and LUNs
// may come as numbers or numeric strings (CSP-MAPPING §1.1).

type token struct {
	ID           string `json:"id,omitempty"`
	Username     string `json:"username,omitempty"`
	Password     string `json:"password,omitempty"`
	ArrayIP      string `json:"array_ip,omitempty"`
	SessionToken string `json:"session_token,omitempty"`
}

type host struct {
	UUID     string   `json:"uuid"`
	Name     string   `json:"name,omitempty"`
	IQNs     []string `json:"iqns,omitempty"`
	WWPNs    []string `json:"wwpns,omitempty"`
	NQNs     []string `json:"nqns,omitempty"`
	Networks []string `json:"networks,omitempty"`
}

type volume struct {
	ID             string         `json:"id,omitempty"`
	Name           string         `json:"name,omitempty"`
	Size           number         `json:"size,omitempty"`
	Description    string         `json:"description,omitempty"`
	Published      bool           `json:"published,omitempty"`
	Config         map[string]any `json:"config,omitempty"`
	BaseSnapshotID string         `json:"base_snapshot_id,omitempty"`
	Clone          bool           `json:"clone,omitempty"`
	VolumeGroupID  string         `json:"volume_group_id,omitempty"`
}

// newVolume is the body of POST /volumes: config always present, even empty.
type newVolume struct {
	Name           string         `json:"name"`
	Size           number         `json:"size"`
	Description    string         `json:"description,omitempty"`
	Config         map[string]any `json:"config"`
	BaseSnapshotID string         `json:"base_snapshot_id,omitempty"`
	Clone          bool           `json:"clone,omitempty"`
}

type snapshot struct {
	ID           string         `json:"id,omitempty"`
	Name         string         `json:"name,omitempty"`
	Size         number         `json:"size,omitempty"`
	Description  string         `json:"description,omitempty"`
	VolumeID     string         `json:"volume_id,omitempty"`
	CreationTime number         `json:"creation_time,omitempty"`
	ReadyToUse   *bool          `json:"ready_to_use,omitempty"`
	InUse        bool           `json:"in_use,omitempty"`
	Config       map[string]any `json:"config,omitempty"`
}

type publishOptions struct {
	HostUUID       string `json:"host_uuid"`
	AccessProtocol string `json:"access_protocol,omitempty"`
}

type publishInfo struct {
	SerialNumber   string      `json:"serial_number,omitempty"`
	AccessProtocol string      `json:"access_protocol,omitempty"`
	LunID          number      `json:"lun_id,omitempty"`
	TargetNames    stringsList `json:"target_names,omitempty"`
	DiscoveryIPs   stringsList `json:"discovery_ips,omitempty"`
}

type volumeGroup struct {
	ID          string         `json:"id,omitempty"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Config      map[string]any `json:"config,omitempty"`
	Volumes     []volumeStub   `json:"volumes,omitempty"`
}

type volumeStub struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

type snapshotGroup struct {
	ID            string         `json:"id,omitempty"`
	Name          string         `json:"name,omitempty"`
	VolumeGroupID string         `json:"volume_group_id,omitempty"`
	Snapshots     []snapshot     `json:"snapshots,omitempty"`
	CreationTime  number         `json:"creation_time,omitempty"`
	Config        map[string]any `json:"config,omitempty"`
}

// number is an int64 that the CSP may send as a JSON number or a numeric string.
type number int64

func (n *number) UnmarshalJSON(b []byte) error {
	b = bytes.Trim(b, `"`)
	if len(b) == 0 || string(b) == "null" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("not a number: %.32q", b)
	}
	*n = number(v)
	return nil
}

// stringsList is a list of strings that the CSP may send as an array, or as one string of
// comma-separated values (a spec example does).
type stringsList []string

func (l *stringsList) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		*l = splitAll(list)
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err != nil {
		return err
	}
	*l = splitAll([]string{one})
	return nil
}

func splitAll(in []string) []string {
	var out []string
	for _, s := range in {
		for _, part := range bytes.Split([]byte(s), []byte(",")) {
			if p := string(bytes.TrimSpace(part)); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
