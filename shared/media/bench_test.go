package media

import "testing"

// BenchmarkAudioMP3_30s measures 30 s of music, synthesised and encoded as
// MP3. MB/s counts output bytes.
func BenchmarkAudioMP3_30s(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		data, _, err := Audio(Music, uint64(i), 30, "mp3")
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
	}
}

// BenchmarkAudioWAV_30s is the same without the MP3 encoder, to show its share.
func BenchmarkAudioWAV_30s(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		data, _, err := Audio(Music, uint64(i), 30, "wav")
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
	}
}

// BenchmarkVideo_5s_640x360 measures a 5 s 640x360 clip. MB/s counts output
// bytes.
func BenchmarkVideo_5s_640x360(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		data, err := Video(uint64(i), 5, 640, 360)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
	}
}

// BenchmarkVideo_8s_1280x720 measures an 8 s 720p clip, the size of a
// typical vendor video.
func BenchmarkVideo_8s_1280x720(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		data, err := Video(uint64(i), 8, 1280, 720)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
	}
}
