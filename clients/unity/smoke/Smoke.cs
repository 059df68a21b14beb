// The package's hello world, as a console program: one session turn with a client tool over TCP.
//   mcs -out:smoke.exe -recurse:'../com.oamd.client/Runtime/*.cs' Smoke.cs && mono smoke.exe HOST PORT TOKEN_FILE
// Prints the turn's text and exits 0, or prints the error and exits 1. No SynchronizationContext here,
// so the main thread pumps the callbacks while it waits, as a game's Update would.

using System;
using System.Collections.Generic;
using System.Threading.Tasks;
using Oamd;

static class Smoke
{
    static int Main(string[] args)
    {
        try
        {
            var client = OamdClient.ConnectTcpAsync(args[0], int.Parse(args[1]), OamdClient.ReadToken(args[2])).GetAwaiter().GetResult();
            using (client)
            {
                var turn = Run(client);
                while (!turn.IsCompleted) client.Pump(TimeSpan.FromMilliseconds(50));
                Console.WriteLine("text: " + turn.Result);
            }
            return 0;
        }
        catch (Exception ex)
        {
            Console.WriteLine("error: " + ex);
            return 1;
        }
    }

    static async Task<string> Run(OamdClient client)
    {
        var openGate = client.RegisterTool(
            ToolDefinition.WithStringArguments("open_gate", "Open a gate.", "gate"),
            call => "the " + call.Argument("gate") + " gate is open");
        var model = new ScriptedModel()
            .ToolCall("open_gate", new Dictionary<string, object> { { "gate", "north" } })
            .Template("{toolOutput}");
        await client.CreateSessionAsync("guard", tools: new[] { openGate }, model: model).ConfigureAwait(false);
        var result = await client.RespondAsync("guard", "Open it.").ConfigureAwait(false);
        return result.Text;
    }
}
