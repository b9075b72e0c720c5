package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc/machinepb"
	"github.com/ployz/ployz/internal/version"
)

// payloadTypes is every request payload a Machine decodes from a caller,
// by command: what an attacker on the RPC port controls.
var payloadTypes = map[string]func() any{
	CmdInitialize:          func() any { return &InitializeRequest{} },
	CmdJoin:                func() any { return &JoinRequest{} },
	CmdPublishMachine:      func() any { return &PublishMachineRequest{} },
	CmdUpdateMachine:       func() any { return &UpdateMachineRequest{} },
	CmdForgetMachine:       func() any { return &ForgetMachineRequest{} },
	CmdCreateContainer:     func() any { return &CreateContainerRequest{} },
	CmdStopContainer:       func() any { return &StopContainerRequest{} },
	CmdRemoveContainer:     func() any { return &RemoveContainerRequest{} },
	CmdWaitReady:           func() any { return &WaitReadyRequest{} },
	CmdListContainers:      func() any { return &ListContainersRequest{} },
	CmdExec:                func() any { return &ExecRequest{} },
	CmdRunContainer:        func() any { return &RunContainerRequest{} },
	CmdMoveServingPointer:  func() any { return &MoveServingPointerRequest{} },
	CmdServingStatus:       func() any { return &ServingStatusRequest{} },
	CmdSaltSpecHashes:      func() any { return &SaltSpecHashesRequest{} },
	CmdStartContainer:      func() any { return &ContainerRef{} },
	CmdExportContainer:     func() any { return &ExportContainerRequest{} },
	CmdListImages:          func() any { return &ListImagesRequest{} },
	CmdIngressStatus:       func() any { return &IngressStatusRequest{} },
	CmdPullImage:           func() any { return &PullImageRequest{} },
	CmdPullImageProgress:   func() any { return &PullImageRequest{} },
	CmdImageRelay:          func() any { return &ImageRelayRequest{} },
	CmdSetVolumeCopy:       func() any { return &SetVolumeCopyRequest{} },
	CmdVolumeTask:          func() any { return &VolumeTaskRequest{} },
	CmdCreateVolume:        func() any { return &CreateVolumeRequest{} },
	CmdRemoveVolume:        func() any { return &VolumeRequest{} },
	CmdInspectVolume:       func() any { return &VolumeRequest{} },
	CmdSnapshotVolume:      func() any { return &SnapshotVolumeRequest{} },
	CmdSendVolume:          func() any { return &SendVolumeRequest{} },
	CmdReceiveVolume:       func() any { return &ReceiveVolumeRequest{} },
	CmdSendVolumeTo:        func() any { return &SendVolumeToRequest{} },
	CmdLogHistory:          func() any { return &LogHistoryRequest{} },
	CmdTailLogs:            func() any { return &TailLogsRequest{} },
	CmdQueryMetrics:        func() any { return &QueryMetricsRequest{} },
	CmdUpgradeMachine:      func() any { return &UpgradeRequest{} },
	CmdUpgradePlugin:       func() any { return &UpgradeRequest{} },
	CmdRecordHistory:       func() any { return &RecordHistoryRequest{} },
	CmdListHistory:         func() any { return &ListHistoryRequest{} },
	CmdSaveRevision:        func() any { return &SaveRevisionRequest{} },
	CmdAddCertificate:      func() any { return &AddCertificateRequest{} },
	CmdRemoveCertificate:   func() any { return &RemoveCertificateRequest{} },
	CmdSetDNSProvider:      func() any { return &SetDNSProviderRequest{} },
	CmdRemoveDNSProvider:   func() any { return &RemoveDNSProviderRequest{} },
	CmdListRevisions:       func() any { return &ListRevisionsRequest{} },
	CmdPutDeployRecord:     func() any { return &PutDeployRecordRequest{} },
	CmdListDeployRecords:   func() any { return &ListDeployRecordsRequest{} },
	CmdAcquireLease:        func() any { return &AcquireLeaseRequest{} },
	CmdRenewLease:          func() any { return &RenewLeaseRequest{} },
	CmdReleaseLease:        func() any { return &ReleaseLeaseRequest{} },
	CmdBeginVolumeRun:      func() any { return &BeginVolumeRunRequest{} },
	CmdPutVolumeRun:        func() any { return &PutVolumeRunRequest{} },
	CmdListVolumeRuns:      func() any { return &ListVolumeRunsRequest{} },
	CmdPutJobs:             func() any { return &PutJobsRequest{} },
	CmdListJobs:            func() any { return &ListJobsRequest{} },
	CmdPutVolumePolicies:   func() any { return &PutVolumePoliciesRequest{} },
	CmdPutAllocation:       func() any { return &PutAllocationRequest{} },
	CmdMarkRemoval:         func() any { return &MarkRemovalRequest{} },
	CmdClearRemoval:        func() any { return &ClearRemovalRequest{} },
	CmdListVolumeSnapshots: func() any { return &VolumeRequest{} },
	CmdRollbackVolume:      func() any { return &RollbackVolumeRequest{} },
}

// payloadCommands is payloadTypes' keys in order; a fuzz input picks one by index.
var payloadCommands = slices.Sorted(maps.Keys(payloadTypes))

func seed(command string) uint8 { return uint8(slices.Index(payloadCommands, command)) }

// jsonNames lists the JSON keys a struct type decodes, through embedded
// structs and pointers.
func jsonNames(t reflect.Type) map[string]bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	out := map[string]bool{}
	if t.Kind() != reflect.Struct {
		return out
	}
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		out[strings.ToLower(name)] = true
	}
	return out
}

// FuzzDecodePayload decodes arbitrary bytes as each command's payload.
// Properties: no panic; a refusal is an invalid_argument *Error, and when
// it names a field (details.field) the field's first segment is a key of
// that payload type and the message starts with it; an accepted payload
// re-encodes to JSON that decodes to the same encoding (the reader keeps
// what it understood and the round trip is stable).
func FuzzDecodePayload(f *testing.F) {
	f.Add(seed(CmdJoin), []byte(`{"name":"m2","network":"10.210.0.0/16","subnet":"10.210.2.0/24","peers":[{"id":"a","public_key":"k","subnet":"10.210.1.0/24","endpoints":["192.0.2.1:51820"]}],"target_versions":{"s":3},"wait_seconds":30}`))
	f.Add(seed(CmdJoin), []byte(`{"peers":[{"id":"a","subnet":"10.210.1.0/33"}]}`))
	f.Add(seed(CmdUpdateMachine), []byte(`{"name":"x","labels_add":{"zone":"a"},"labels_remove":["b"],"future":1}`))
	f.Add(seed(CmdCreateContainer), []byte(`{"name":"hello-prod-web-1a2b","spec":{"image":"app:1","env":{"A":"b"},"ports":[{"container_port":80}]}}`))
	f.Add(seed(CmdMoveServingPointer), []byte(`{"service":"hello-prod/web","containers":[{"id":"c1"}]}`))
	f.Add(seed(CmdSaltSpecHashes), []byte(`{"digests":["`+strings.Repeat("ab", 32)+`",7]}`))
	f.Add(seed(CmdExec), []byte(``))
	f.Add(seed(CmdRunContainer), []byte(`{"name":"hello-default-web-run-1a2b","spec":{"namespace":"hello-default","service":"web","image":"app:1","kind":"run","entrypoint":["/testapp"],"command":["--exit-code","3"]},"tty":true,"stdin":true,"width":120,"height":40,"keep":true}`))
	f.Add(seed(CmdRunContainer), []byte(`{"name":"x","spec":{"kind":"service"},"detach":true,"tty":true,"width":-1}`))
	f.Add(seed(CmdImageRelay), []byte(`{"targets":[{"machine_id":"m2","skip":["a/layer.tar"]},{"machine_id":""}]}`))
	f.Add(seed(CmdPullImageProgress), []byte(`{"image":"registry.test/app:1","registry_auth":"e30"}`))
	f.Add(seed(CmdVolumeTask), []byte(`{"volume":"db","gen":3,"expect":"writer","kind":"stop","stop":{"id":"c1","grace_period_seconds":10}}`))
	f.Add(seed(CmdVolumeTask), []byte(`{"volume":"db","kind":"pull","pull":{"image":7}}`))
	f.Add(seed(CmdCreateVolume), []byte(`{"name":"db","size_bytes":1073741824}`))
	f.Add(seed(CmdRollbackVolume), []byte(`{"volume":"db","gen":4,"snapshot":"auto-20261207-1100","destroy_newer":true}`))
	f.Add(seed(CmdRollbackVolume), []byte(`{"volume":"db","gen":0,"snapshot":"a@b","destroy_newer":"yes"}`))
	f.Add(seed(CmdListVolumeSnapshots), []byte(`{"name":"db","later":1}`))
	f.Add(seed(CmdSendVolume), []byte(`{"volume":"db","snapshot":"s2","from_snapshot":"s1","raw_data":true}`))
	f.Add(seed(CmdSendVolumeTo), []byte(`{"volume":"db","resume_token":"1-abc-d0-789c","target":"m2","resumable":true}`))
	f.Add(seed(CmdReceiveVolume), []byte(`{"volume":"db","resumable":"yes"}`))
	f.Add(seed(CmdLogHistory), []byte(`{"limit":-1,"since_unix_nano":1}`))
	f.Add(seed(CmdQueryMetrics), []byte(`{"step_seconds":1.5}`))
	f.Add(seed(CmdUpgradeMachine), []byte(`{"version":"v1.2.3","sha256":"`+strings.Repeat("ab", 32)+`","size":1024}`))
	f.Add(seed(CmdUpgradePlugin), []byte(`{"version":"../x","sha256":"zz","size":-1,"plugin":"volume-zfs"}`))
	f.Add(seed(CmdRecordHistory), []byte(`{"entry":{"id":"h1","kind":"deploy","operator":{"name":"ana"},"started_at":5,"outcome":"running","revision":"x"}}`))
	f.Add(seed(CmdListHistory), []byte(`{"kind":"nope","limit":-3}`))
	f.Add(seed(CmdSaveRevision), []byte(`{"id":"r1","project":"shop","environment":"production","compose":"bmFtZTogc2hvcAo=","operator":{"name":"ana"}}`))
	f.Add(seed(CmdListRevisions), []byte(`{"namespace":"shop-production","revision":"7"}`))
	f.Add(seed(CmdPutDeployRecord), []byte(`{"deployment_id":"d1","namespace":"n","started_at":1,"updated_at":2,"record":{"status":"running"}}`))
	f.Add(seed(CmdPutAllocation), []byte(`{"machine_id":"m3","subnet":"10.210.3.0/24","state":"allocated","operator":{"name":"ana"}}`))
	f.Add(seed(CmdMarkRemoval), []byte(`{"project":"shop","environment":"production","operator":{"name":"ana"},"created_at":"x"}`))
	f.Fuzz(func(t *testing.T, which uint8, payload []byte) {
		command := payloadCommands[int(which)%len(payloadCommands)]
		mk := payloadTypes[command]
		v := mk()
		err := Decode(command, payload, v)
		if err != nil {
			checkTypedRefuses(t, command, payload, err)
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidArgument || e.Message == "" {
				t.Fatalf("refusal %#v is not an invalid_argument *Error", err)
			}
			if field, ok := e.Details["field"].(string); ok {
				top := strings.ToLower(strings.FieldsFunc(field, func(r rune) bool { return r == '.' || r == '[' })[0])
				if !jsonNames(reflect.TypeOf(v))[top] {
					t.Fatalf("refusal names field %q, not a key of %T: %v", field, v, err)
				}
				if !strings.HasPrefix(e.Message, field+": ") {
					t.Fatalf("message %q does not start with its field %q", e.Message, field)
				}
			}
			return
		}
		checkValidate(t, v)
		first, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("accepted %q but cannot encode it: %v", payload, err)
		}
		checkTyped(t, command, payload, first)
		again := mk()
		if err := Decode(command, first, again); err != nil {
			t.Fatalf("own encoding %s refused: %v", first, err)
		}
		second, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("round trip not stable:\n %s\n %s", first, second)
		}
	})
}

// checkValidate runs a decoded payload's own checks where it has them
// (the daemon runs them next): no panic, and a refusal is an
// invalid_argument *Error with a message.
func checkValidate(t *testing.T, v any) {
	val, ok := v.(interface{ Validate() error })
	if !ok {
		return
	}
	err := val.Validate()
	if err == nil {
		return
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidArgument || e.Message == "" {
		t.Fatalf("%T.Validate refusal %#v is not an invalid_argument *Error", v, err)
	}
	if field, ok := e.Details["field"].(string); ok && !strings.HasPrefix(e.Message, field+": ") {
		t.Fatalf("%T.Validate message %q does not start with its field %q", v, e.Message, field)
	}
}

// FuzzCall sends arbitrary request frames to a Server with a decoding
// route, as any peer on the RPC port can. Properties: no panic; every
// answer is a Response envelope with this protocol_major and exactly one
// of payload or error; errors carry a code.
func FuzzCall(f *testing.F) {
	f.Add([]byte(`{"protocol_major":1,"command":"update_machine","payload":{"name":"x"}}`))
	f.Add([]byte(`{"protocol_major":1,"command":"update_machine","payload":{"name":7}}`))
	f.Add([]byte(`{"protocol_major":2,"command":"describe_contract"}`))
	f.Add([]byte(`{"protocol_major":1,"command":"describe_contract","payload":[]}`))
	f.Add([]byte(`{"protocol_major":1,"command":"nope"}`))
	f.Add([]byte(`not json`))
	s := NewServer(Options{Local: func() (string, string) { return "0123456789abcdef", "m1" }})
	s.Handle(Bind(UpdateMachine, func(_ context.Context, req UpdateMachineRequest) (Inspection, error) {
		in := Inspection{ID: "0123456789abcdef", Labels: req.LabelsAdd}
		if req.Name != nil {
			in.Name = *req.Name
		}
		return in, nil
	}))
	f.Fuzz(func(t *testing.T, frame []byte) {
		out, err := s.Call(context.Background(), &machinepb.Frame{Json: frame})
		if err != nil {
			t.Fatalf("Call returned a transport error: %v", err)
		}
		var resp struct {
			ProtocolMajor *int             `json:"protocol_major"`
			Payload       *json.RawMessage `json:"payload"`
			Error         *Error           `json:"error"`
		}
		if err := json.Unmarshal(out.GetJson(), &resp); err != nil {
			t.Fatalf("answer %q is not JSON: %v", out.GetJson(), err)
		}
		if resp.ProtocolMajor == nil || *resp.ProtocolMajor != version.ProtocolMajor {
			t.Fatalf("answer %s: protocol_major", out.GetJson())
		}
		if (resp.Payload == nil) == (resp.Error == nil) {
			t.Fatalf("answer %s: want exactly one of payload and error", out.GetJson())
		}
		if resp.Error != nil && (resp.Error.Code == "" || resp.Error.Message == "") {
			t.Fatalf("answer %s: an error without code or message", out.GetJson())
		}
	})
}

// checkTyped decodes an accepted payload again through its declared
// Method's decoder (the one Bind serves with), when the command is
// declared: it accepts it too and keeps the same value.
func checkTyped(t *testing.T, command string, payload, want []byte) {
	d, ok := Lookup(command)
	if !ok {
		return
	}
	v, err := d.decode(payload)
	if err != nil {
		t.Fatalf("Decode accepted %q, the typed decoder of %s refuses it: %v", payload, command, err)
	}
	got, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("typed decoder of %s read %s, Decode %s", command, got, want)
	}
}

// checkTypedRefuses: a payload Decode refuses, the typed decoder refuses
// with the same error.
func checkTypedRefuses(t *testing.T, command string, payload []byte, want error) {
	d, ok := Lookup(command)
	if !ok {
		return
	}
	if _, err := d.decode(payload); err == nil || err.Error() != want.Error() {
		t.Fatalf("typed decoder of %s on %q: %v, Decode: %v", command, payload, err, want)
	}
}
