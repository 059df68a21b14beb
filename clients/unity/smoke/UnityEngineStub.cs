// Just enough of UnityEngine for mcs to compile the package's UNITY_5_3_OR_NEWER code and the sample
// outside Unity (tests/test_unity_package.py). Never shipped; the signatures match UnityEngine's, and the
// Raise* methods (not UnityEngine's) let the scenario play the engine's part.

using System;

namespace UnityEngine
{
    public class Object { }
    public class Component : Object { }
    public class Behaviour : Component { }
    public class MonoBehaviour : Behaviour { }

    public class GameObject : Object
    {
        public void SetActive(bool value) { }
    }

    public static class Debug
    {
        public static void Log(object message) { }
        public static void LogError(object message) { }
        public static void LogException(Exception exception) { }
    }

    public static class Application
    {
        public static string streamingAssetsPath { get { return "StreamingAssets"; } }
        public static event Action quitting;

        /// <summary>Not UnityEngine's: what the engine does when the player quits, for the scenario.</summary>
        public static void RaiseQuitting() { var q = quitting; if (q != null) q(); }
    }

    public enum RuntimeInitializeLoadType { AfterSceneLoad, BeforeSceneLoad, AfterAssembliesLoaded, BeforeSplashScreen, SubsystemRegistration }

    [AttributeUsage(AttributeTargets.Method)]
    public sealed class RuntimeInitializeOnLoadMethodAttribute : Attribute
    {
        public RuntimeInitializeOnLoadMethodAttribute() { }
        public RuntimeInitializeOnLoadMethodAttribute(RuntimeInitializeLoadType loadType) { }
    }

    public sealed class TooltipAttribute : Attribute
    {
        public TooltipAttribute(string tooltip) { }
    }

    public sealed class AddComponentMenu : Attribute
    {
        public AddComponentMenu(string menuName) { }
    }
}
