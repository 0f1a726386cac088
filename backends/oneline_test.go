package backends

import "testing"

func TestOneLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain words", "plain words"},
		{"password=hunter2\n", "password=hunter2"},
		{"a\r\nb", "a b"},
		{"\ttab\t\tand  spaces ", "tab and spaces"},
		{"bell\a and NUL\x00", "bell and NUL"},
		{"line\u2028separator\u2029paragraph", "line separator paragraph"},
		{"C1\u0085control", "C1 control"},
		{"invalid\xff\xfeutf8", "invalid\uFFFDutf8"},
	}
	for _, tt := range tests {
		if got := OneLine(tt.in); got != tt.want {
			t.Errorf("OneLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
