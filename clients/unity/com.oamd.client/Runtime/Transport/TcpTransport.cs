// TcpTransport: a connection to `oamd serve --tcp HOST:PORT`. The token handshake is the client's
// (it is an `initialize` request); this only opens the socket.

using System.Net.Sockets;
using System.Threading.Tasks;

namespace Oamd
{
    public sealed class TcpTransport : LineTransport
    {
        readonly TcpClient _tcp;

        TcpTransport(TcpClient tcp) : base(tcp.GetStream(), tcp.GetStream())
        {
            _tcp = tcp;
        }

        /// <summary>Connects; raises SocketException when nothing listens there.</summary>
        public static async Task<TcpTransport> ConnectAsync(string host, int port)
        {
            var tcp = new TcpClient();
            try
            {
                await tcp.ConnectAsync(host, port).ConfigureAwait(false);
            }
            catch
            {
                tcp.Close();
                throw;
            }
            tcp.NoDelay = true;  // one small request per line: don't let Nagle hold it back
            return new TcpTransport(tcp);
        }

        public override void Dispose()
        {
            _tcp.Close();
        }
    }
}
