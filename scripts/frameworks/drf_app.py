"""A Django REST framework app in one file, served by Django's runserver: python drf_app.py PORT."""
import sys

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="peel-frameworks-test",
    ALLOWED_HOSTS=["127.0.0.1", "localhost"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "rest_framework"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    MIDDLEWARE=["django.middleware.common.CommonMiddleware"],
    REST_FRAMEWORK={"DEFAULT_AUTHENTICATION_CLASSES": [], "DEFAULT_PERMISSION_CLASSES": [],
                    "UNAUTHENTICATED_USER": None},
    USE_TZ=True,
)
django.setup()

from django.http import Http404  # noqa: E402
from django.urls import path  # noqa: E402
from rest_framework import serializers, status  # noqa: E402
from rest_framework.authentication import TokenAuthentication  # noqa: E402
from rest_framework.exceptions import NotFound  # noqa: E402
from rest_framework.permissions import IsAuthenticated  # noqa: E402
from rest_framework.response import Response  # noqa: E402
from rest_framework.views import APIView  # noqa: E402

BOOKS = [{"id": 1, "title": "Le Petit Prince", "author": "Antoine de Saint-Exupéry"},
         {"id": 2, "title": "三体", "author": "刘慈欣"}]


class AddressSerializer(serializers.Serializer):
    city = serializers.CharField(max_length=40)
    postcode = serializers.RegexField(r"^\d{5}$")


class SignupSerializer(serializers.Serializer):
    email = serializers.EmailField()
    password = serializers.CharField(min_length=8)
    password2 = serializers.CharField()
    address = AddressSerializer()

    def validate(self, attrs):
        if attrs["password"] != attrs["password2"]:
            raise serializers.ValidationError("The two passwords do not match.")
        return attrs


class Signup(APIView):
    def post(self, request):
        s = SignupSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        return Response({"email": s.validated_data["email"]}, status=status.HTTP_201_CREATED)


class Books(APIView):
    def get(self, request):
        return Response(BOOKS)


class Book(APIView):
    def get(self, request, pk):
        for book in BOOKS:
            if book["id"] == pk:
                return Response(book)
        raise NotFound()


class Shelf(APIView):
    """Django's Http404, as get_object_or_404 raises it; DRF's handler answers it as NotFound."""
    def get(self, request, name):
        raise Http404("No Shelf matches the given query.")


class Profile(APIView):
    authentication_classes = [TokenAuthentication]
    permission_classes = [IsAuthenticated]

    def get(self, request):
        return Response({"user": str(request.user)})


urlpatterns = [
    path("signup", Signup.as_view()),
    path("books", Books.as_view()),
    path("books/<int:pk>", Book.as_view()),
    path("shelves/<str:name>", Shelf.as_view()),
    path("profile", Profile.as_view()),
]

if __name__ == "__main__":
    from django.core.management import execute_from_command_line
    execute_from_command_line([sys.argv[0], "runserver", "--noreload", "--skip-checks", f"127.0.0.1:{sys.argv[1]}"])
