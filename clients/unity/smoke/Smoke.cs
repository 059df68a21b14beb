// Drives a running `oamd serve` through one session turn with a client tool, using OamdClient:
//   mcs -out:smoke.exe ../OamdClient.cs Smoke.cs && mono smoke.exe HOST PORT TOKEN_FILE
// Prints the turn's text and exits 0, or prints the error and exits 1.

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
            Run(args[0], int.Parse(args[1]), OamdClient.ReadToken(args[2])).GetAwaiter().GetResult();
            return 0;
        }
        catch (Exception ex)
        {
            Console.WriteLine("error: " + ex);
            return 1;
        }
    }

    static async Task Run(string host, int port, string token)
    {
        using (var client = await OamdClient.ConnectAsync(host, port, token, "unity-smoke"))
        {
            int events = 0;
            client.SessionEvent += (session, requestId, ev) => events++;
            client.OnToolCall = (name, arguments, callParams) =>
            {
                var gate = (string)((Dictionary<string, object>)arguments)["gate"];
                return Task.FromResult<object>("the " + gate + " gate is open");
            };
            var tool = new Dictionary<string, object> {
                { "name", "open_gate" },
                { "description", "Open a gate." },
                { "parameters", new Dictionary<string, object> {
                    { "type", "object" },
                    { "properties", new Dictionary<string, object> {
                        { "gate", new Dictionary<string, object> { { "type", "string" } } } } } } },
            };
            var model = new Dictionary<string, object> {
                { "type", "scripted" },
                { "steps", new List<object> {
                    new Dictionary<string, object> { { "toolCalls", new List<object> {
                        new Dictionary<string, object> { { "name", "open_gate" },
                            { "arguments", new Dictionary<string, object> { { "gate", "north" } } } } } } },
                    new Dictionary<string, object> { { "template", "{toolOutput}" } } } },
            };
            await client.RequestAsync("session/create", new Dictionary<string, object> {
                { "session", "guard" }, { "model", model }, { "tools", new List<object> { tool } } });
            var result = (Dictionary<string, object>)await client.RequestAsync("session/respond",
                new Dictionary<string, object> { { "session", "guard" }, { "prompt", "Open it." }, { "stream", true } });
            try
            {
                await client.RequestAsync("session/respond", new Dictionary<string, object> { { "session", "nope" }, { "prompt", "x" } });
            }
            catch (OamdException ex)
            {
                Console.WriteLine("expected error: " + ex.Name);
            }
            Console.WriteLine("text: " + result["text"]);
            Console.WriteLine("events: " + (events > 0 ? "yes" : "no"));
        }
    }
}
