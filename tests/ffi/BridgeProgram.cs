// BridgeProgram.cs: a C# program calling liboamd_ffi's six functions through P/Invoke, the way a
// Unity binding written for Apple's library does; run under Mono by tests/test_ffi_programs.py.
// Prints one "key: value" line per check.
using System;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;

static class Native
{
    const string Library = "oamd_ffi";

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    public delegate void MessageCallback(IntPtr jsonLine, IntPtr userData);

    [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
    public static extern IntPtr oam_bridge_create(MessageCallback callback, IntPtr userData);

    [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
    public static extern int oam_bridge_send(IntPtr bridge, byte[] jsonLine);

    [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
    public static extern void oam_bridge_destroy(IntPtr bridge);

    [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
    public static extern IntPtr oam_version();

    [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
    public static extern IntPtr oam_call_blocking(IntPtr bridge, byte[] requestJson, int timeoutMs);

    [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
    public static extern void oam_string_free(IntPtr text);
}

static class BridgeProgram
{
    static readonly object Gate = new object();
    static string last;
    static int lines;

    static byte[] Utf8(string text)
    {
        var bytes = Encoding.UTF8.GetBytes(text);
        Array.Resize(ref bytes, bytes.Length + 1); // the terminating NUL
        return bytes;
    }

    static string Read(IntPtr text)
    {
        int n = 0;
        while (Marshal.ReadByte(text, n) != 0) n++;
        var bytes = new byte[n];
        Marshal.Copy(text, bytes, 0, n);
        return Encoding.UTF8.GetString(bytes);
    }

    static void OnMessage(IntPtr jsonLine, IntPtr userData)
    {
        lock (Gate)
        {
            last = Read(jsonLine);
            lines++;
            Monitor.PulseAll(Gate);
        }
    }

    static int Main()
    {
        Console.WriteLine("version: " + Read(Native.oam_version()));
        Native.MessageCallback callback = OnMessage; // kept alive until destroy returns
        IntPtr bridge = Native.oam_bridge_create(callback, IntPtr.Zero);
        Console.WriteLine("created: " + (bridge != IntPtr.Zero));
        Console.WriteLine("send: " + Native.oam_bridge_send(bridge, Utf8("{\"jsonrpc\":\"2.0\",\"id\":\"cs\",\"method\":\"ping\"}")));
        lock (Gate)
        {
            while (lines == 0) if (!Monitor.Wait(Gate, 10000)) break;
            Console.WriteLine("callback: " + last);
        }
        IntPtr response = Native.oam_call_blocking(bridge, Utf8("{\"id\":0,\"method\":\"ping\"}"), 10000);
        Console.WriteLine("blocking: " + Read(response));
        Native.oam_string_free(response);
        Console.WriteLine("invalid utf8: " + Native.oam_bridge_send(bridge, new byte[] { 0x7b, 0xff, 0x7d, 0 }));
        Native.oam_bridge_destroy(bridge);
        Console.WriteLine("destroyed: True");
        GC.KeepAlive(callback);
        return 0;
    }
}
