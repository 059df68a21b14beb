// Client tools: the definition sent with a session or NPC, the call the daemon makes (`tool/call`), the
// record a turn result keeps, and the `tool/cancel` notice. Handlers are registered on OamdClient.

using System.Collections.Generic;

namespace Oamd
{
    /// <summary>A tool the model may call; the game runs it (execution "client").</summary>
    public sealed class ToolDefinition : IJsonValue
    {
        public string Name;
        public string Description;
        /// <summary>JSON Schema of the arguments; null: no arguments.</summary>
        public Dictionary<string, object> Parameters;
        /// <summary>How long the daemon waits for the answer before <c>tool/cancel</c>; null: its default.</summary>
        public double? TimeoutSeconds;

        public ToolDefinition(string name, string description, Dictionary<string, object> parameters = null)
        {
            Name = name;
            Description = description;
            Parameters = parameters;
        }

        /// <summary>A tool whose arguments are the given required string properties.</summary>
        public static ToolDefinition WithStringArguments(string name, string description, params string[] arguments)
        {
            var properties = new Dictionary<string, object>();
            foreach (var argument in arguments)
                properties[argument] = new Dictionary<string, object> { { "type", "string" } };
            return new ToolDefinition(name, description, new Dictionary<string, object> {
                { "type", "object" }, { "properties", properties }, { "required", new List<object>(arguments) },
            });
        }

        public object ToJson()
        {
            return new Dictionary<string, object> { { "name", Name } }
                .Put("description", Description).Put("parameters", Parameters).Put("timeoutSeconds", TimeoutSeconds);
        }
    }

    /// <summary>One call of a client tool: what a ToolHandler is given.</summary>
    public sealed class ToolCall
    {
        /// <summary>The call's id (<c>call_…</c>), as in the turn's toolCalls records.</summary>
        public readonly string Id;
        public readonly string Name;
        /// <summary>The arguments as parsed JSON (usually a Dictionary&lt;string, object&gt;).</summary>
        public readonly object Arguments;
        /// <summary>The session the call is for, or null.</summary>
        public readonly string Session;
        /// <summary>The NPC the call is for, or null (decisions and content/generate have neither).</summary>
        public readonly string Npc;
        /// <summary>The id of the request whose turn made the call (null for a notification's turn).</summary>
        public readonly object RequestId;
        /// <summary>The decision's position in decision/decideMany, else null.</summary>
        public readonly long? Index;

        internal ToolCall(Dictionary<string, object> p)
        {
            var call = JsonFields.Object(p, "call");
            Id = JsonFields.String(call, "id");
            Name = JsonFields.String(call, "name");
            Arguments = JsonFields.Get(call, "arguments");
            Session = JsonFields.String(p, "session");
            Npc = JsonFields.String(p, "npc");
            RequestId = JsonFields.Get(p, "requestId");
            if (p.ContainsKey("index")) Index = JsonFields.Long(p, "index");
        }

        /// <summary>One argument by name, or null.</summary>
        public object Argument(string name)
        {
            return JsonFields.Get(Arguments as Dictionary<string, object>, name);
        }
    }

    /// <summary>A finished tool call as a turn result records it.</summary>
    public sealed class ToolCallRecord
    {
        public readonly string Id;
        public readonly string Name;
        public readonly object Arguments;
        /// <summary>The output: a string, or the JSON value the game returned.</summary>
        public readonly object Output;
        public readonly bool IsError;
        public readonly double DurationSeconds;

        internal ToolCallRecord(Dictionary<string, object> o)
        {
            var call = JsonFields.Object(o, "call");
            Id = JsonFields.String(call, "id");
            Name = JsonFields.String(call, "name");
            Arguments = JsonFields.Get(call, "arguments");
            Output = JsonFields.Get(o, "output");
            IsError = JsonFields.Bool(o, "isError");
            object d = JsonFields.Get(o, "durationSeconds");
            DurationSeconds = d is double ? (double)d : d is long ? (long)d : 0;
        }

        internal static List<ToolCallRecord> ListOf(Dictionary<string, object> result)
        {
            return JsonFields.Objects(result, "toolCalls", o => new ToolCallRecord(o));
        }
    }

    /// <summary>A <c>tool/cancel</c>: the call <c>CallId</c> (request <c>Id</c>) is no longer needed.</summary>
    public sealed class ToolCancelArgs
    {
        public readonly object Id;
        public readonly string CallId;
        public readonly string Reason;
        public readonly string Session;
        public readonly string Npc;
        public readonly object RequestId;

        internal ToolCancelArgs(Dictionary<string, object> p)
        {
            Id = JsonFields.Get(p, "id");
            CallId = JsonFields.String(p, "callId");
            Reason = JsonFields.String(p, "reason");
            Session = JsonFields.String(p, "session");
            Npc = JsonFields.String(p, "npc");
            RequestId = JsonFields.Get(p, "requestId");
        }
    }
}
