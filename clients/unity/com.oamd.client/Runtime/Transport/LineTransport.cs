// LineTransport: the wire below the client, one JSON message per line, UTF-8 without a byte order mark.
// It knows no methods. The client reads from one thread and writes from one other thread, so neither
// side locks; Dispose may come from any thread and makes a blocked ReadLine return null.

using System;
using System.IO;
using System.Text;

namespace Oamd
{
    public abstract class LineTransport : IDisposable
    {
        static readonly Encoding Utf8 = new UTF8Encoding(false);

        readonly Stream _input;
        readonly Stream _output;
        readonly byte[] _chunk = new byte[65536];
        readonly MemoryStream _line = new MemoryStream();
        int _start;
        int _end;

        protected LineTransport(Stream input, Stream output)
        {
            _input = input;
            _output = output;
        }

        /// <summary>Why the stream ended, for the message of OamdDisconnectedException.</summary>
        public virtual string CloseReason { get { return "The connection to oamd closed."; } }

        /// <summary>The next line without its newline; null at the end of the stream.</summary>
        public string ReadLine()
        {
            while (true)
            {
                for (int i = _start; i < _end; i++)
                {
                    if (_chunk[i] != (byte)'\n') continue;
                    _line.Write(_chunk, _start, i - _start);
                    _start = i + 1;
                    string text = Utf8.GetString(_line.GetBuffer(), 0, (int)_line.Length);
                    _line.SetLength(0);
                    return text;
                }
                _line.Write(_chunk, _start, _end - _start);
                _start = 0;
                try { _end = _input.Read(_chunk, 0, _chunk.Length); }
                catch (IOException) { _end = 0; }
                catch (ObjectDisposedException) { _end = 0; }
                if (_end <= 0) return null;
            }
        }

        /// <summary>Writes one line and flushes it. Raises IOException once the peer is gone.</summary>
        public void WriteLine(string line)
        {
            byte[] bytes = Utf8.GetBytes(line + "\n");
            _output.Write(bytes, 0, bytes.Length);
            _output.Flush();
        }

        public abstract void Dispose();
    }
}
